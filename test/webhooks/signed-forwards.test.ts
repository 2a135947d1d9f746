import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { startSimulator, type SimulatorHandle } from '../../src/simulator/index.js';
import { getTestRedis, type TestRedis } from '../helpers/redis.js';
import { capturingLogger, startTestSidecar, testClock, type TestSidecar } from '../helpers/sidecar.js';
import { PATIENTLY } from '../helpers/wait.js';
import { deliveryHeaders, SECRET_A, sign, startApp, type FakeApp } from '../helpers/webhooks.js';

// Signed forwards (docs/webhooks.md, Signed forwards): with --app-signing-secret-file, every event
// the sidecar hands the app (passthrough, queue, REDEC hand-over) carries x-consent-sidecar-timestamp
// and x-consent-sidecar-signature, checked here with node:crypto (test/helpers/webhooks.ts's sign),
// independently of src/webhooks/forward-signature.ts.

const KEY = 'signed-forwards-key';
const OLD = 'app-signing-secret-old-0123456789abcdef';
const NEW = 'app-signing-secret-new-0123456789abcdef';
const dir = mkdtempSync(join(tmpdir(), 'signed-forwards-'));
let sim: SimulatorHandle;
let redis: TestRedis | undefined;
let app: FakeApp | undefined;
const sidecars: TestSidecar[] = [];
let n = 0;

beforeAll(async () => {
  sim = await startSimulator({ apiKey: KEY });
});
afterEach(async () => {
  await Promise.allSettled(sidecars.splice(0).map((s) => s.close()));
  await app?.close();
  app = undefined;
});
afterAll(async () => {
  await sim?.close();
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function secretFile(...lines: string[]): string {
  const path = join(dir, `secret-${++n}`);
  writeFileSync(path, `${lines.join('\n')}\n`);
  return path;
}

async function sidecar(flags: Record<string, string>, deps: Parameters<typeof startTestSidecar>[2] = {}): Promise<TestSidecar> {
  app ??= await startApp();
  const s = await startTestSidecar(sim.url, { 'api-key': KEY, 'app-webhook-url': app.url, 'webhook-secret': SECRET_A, 'webhook-listen': '127.0.0.1:0', ...flags }, deps);
  sidecars.push(s);
  return s;
}

/** One delivery as the service makes it, signed here at `atMs`, with `extra` headers beside the service's. */
async function deliver(s: TestSidecar, id: string, atMs = Date.now(), extra: Record<string, string> = {}): Promise<{ status: number; body: unknown }> {
  const body = JSON.stringify({ id, sequence: ++n, type: 'consent_action.created', occurredAt: atMs, data: { userReference: 'u', configKey: 'k', action: 'grant' } });
  const res = await fetch(`${s.handle.urls.webhook}/webhooks`, { method: 'POST', headers: { ...deliveryHeaders(SECRET_A, Math.floor(atMs / 1000), body, id), ...extra }, body });
  return { status: res.status, body: await res.json() };
}

/** What the app got for `id` (its body's id), the last copy. */
const received = (id: string): { headers: IncomingHttpHeaders; body: Buffer } | undefined =>
  app?.received.filter((r) => (JSON.parse(r.body.toString()) as { id: string }).id === id).at(-1);

/** Whether `headers` sign `body` under `secret`, computed with node:crypto. */
function signedBy(headers: IncomingHttpHeaders, body: Buffer, secret: string): boolean {
  const ts = headers['x-consent-sidecar-timestamp'];
  return typeof ts === 'string' && headers['x-consent-sidecar-signature'] === sign(secret, ts, body);
}

describe('signed forwards', () => {
  it('passthrough: the forward carries the timestamp (epoch s, now) and v1=HMAC-SHA256("<timestamp>.<raw body>") under the first secret', async () => {
    const clock = testClock();
    const s = await sidecar({ 'app-signing-secret-file': secretFile(NEW, OLD) }, { now: clock.now });
    expect(await deliver(s, 'evt_signed_1', clock.now())).toEqual({ status: 200, body: { status: 'accepted' } });
    const got = received('evt_signed_1')!;
    expect(got.headers['x-consent-sidecar-timestamp']).toBe(String(clock.now() / 1000));
    expect(got.headers['x-consent-sidecar-signature']).toMatch(/^v1=[0-9a-f]{64}$/);
    expect(signedBy(got.headers, got.body, NEW)).toBe(true);
    expect(signedBy(got.headers, got.body, OLD)).toBe(false);
    // Beside the service's own headers, which stay as they were.
    expect(got.headers).toMatchObject({ 'x-consent-sidecar-verified': 'v1', 'x-service-event-id': 'evt_signed_1' });
  });

  it("the service's delivery cannot bring the sidecar's signature headers: the app gets the sidecar's own", async () => {
    const s = await sidecar({ 'app-signing-secret-file': secretFile(NEW) });
    const forged = { 'x-consent-sidecar-timestamp': '1', 'x-consent-sidecar-signature': `v1=${'0'.repeat(64)}` };
    expect((await deliver(s, 'evt_signed_2', Date.now(), forged)).status).toBe(200);
    const got = received('evt_signed_2')!;
    expect(got.headers['x-consent-sidecar-timestamp']).not.toBe('1');
    expect(signedBy(got.headers, got.body, NEW)).toBe(true);
  });

  it('a rotated file is followed: once the new secret is its first line, forwards are signed with it', async () => {
    const path = secretFile(OLD);
    const s = await sidecar({ 'app-signing-secret-file': path, 'secret-poll-interval-ms': '100' });
    expect((await deliver(s, 'evt_rot_1')).status).toBe(200);
    expect(signedBy(received('evt_rot_1')!.headers, received('evt_rot_1')!.body, OLD)).toBe(true);
    writeFileSync(path, `${NEW}\n${OLD}\n`);
    // Each try is one more event: the condition is a forward signed with the new secret.
    await vi.waitFor(async () => {
      const id = `evt_rot_${++n}`;
      expect((await deliver(s, id)).status).toBe(200);
      expect(signedBy(received(id)!.headers, received(id)!.body, NEW)).toBe(true);
    }, PATIENTLY);
  });

  it('the REDEC hand-over is signed the same way', async () => {
    sim.revokeConsent({ userReference: 'alice', configKey: 'credit-report' });
    const s = await sidecar({ 'app-signing-secret-file': secretFile(NEW), 'redec-reconcile-interval-ms': '100', 'redec-reconcile-grace-ms': '0' });
    await vi.waitFor(() => s.metric('consent_sidecar_redec_handed_to_app_total', { outcome: 'accepted' }).then((v) => expect(v).toBeGreaterThanOrEqual(1)), PATIENTLY);
    const handed = app!.received.find((r) => r.headers['x-consent-sidecar-reconciled'] === '1')!;
    expect((JSON.parse(handed.body.toString()) as { type: string }).type).toBe('consent_sidecar.redec.notification_pending');
    expect(signedBy(handed.headers, handed.body, NEW)).toBe(true);
  });

  it('queue mode: the forward a worker makes is signed', async () => {
    redis ??= await getTestRedis();
    const s = await sidecar({ 'app-signing-secret-file': secretFile(NEW), 'webhook-delivery': 'queue', 'redis-url': redis.url, 'redis-key-prefix': redis.prefix() });
    expect(await deliver(s, 'evt_queued_1')).toEqual({ status: 200, body: { status: 'queued' } });
    await vi.waitFor(() => expect(received('evt_queued_1')).toBeDefined(), PATIENTLY);
    const got = received('evt_queued_1')!;
    expect(signedBy(got.headers, got.body, NEW)).toBe(true);
    expect(got.headers['x-consent-sidecar-verified']).toBe('v1');
  });

  it('without the flag: one warning at start that forwards are unauthenticated, and forwards carry no signature', async () => {
    const log = capturingLogger('warn');
    const s = await sidecar({}, { logger: log.logger });
    expect(log.lines().filter((l) => l.event === 'forwards_unsigned')).toHaveLength(1);
    expect(log.lines().find((l) => l.event === 'forwards_unsigned')).toMatchObject({ level: 'warn', msg: expect.stringContaining('forwarded events are unauthenticated') });
    expect((await deliver(s, 'evt_unsigned_1')).status).toBe(200);
    expect((await deliver(s, 'evt_unsigned_2')).status).toBe(200);
    expect(received('evt_unsigned_1')!.headers).not.toHaveProperty('x-consent-sidecar-signature');
    expect(received('evt_unsigned_1')!.headers).not.toHaveProperty('x-consent-sidecar-timestamp');
    expect(log.lines().filter((l) => l.event === 'forwards_unsigned')).toHaveLength(1);
  });

  it('with the flag, no such warning', async () => {
    const log = capturingLogger('warn');
    await sidecar({ 'app-signing-secret-file': secretFile(NEW) }, { logger: log.logger });
    expect(log.lines().filter((l) => l.event === 'forwards_unsigned')).toEqual([]);
  });
});
