import { spawn, type ChildProcess } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { signingSecretsFrom, verifyForwardedEvent } from '../../src/client/index.js';
import { startSimulator, type SimulatorHandle } from '../../src/simulator/index.js';
import { getTestRedis, type TestRedis } from '../helpers/redis.js';
import { startTestSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { buildWith, PYTHON, requireToolchains } from '../helpers/toolchains.js';
import { PATIENTLY } from '../helpers/wait.js';
import { deliveryHeaders, SECRET_A } from '../helpers/webhooks.js';

// The last hop, end to end: an app that verifies the sidecar's forwards (the TypeScript client's
// verifyForwardedEvent, and the Python, Go and Java functions of docs/clients.md, each the very file
// the page shows) takes a genuine forward in both delivery modes and the REDEC hand-over, and
// refuses what is posted straight to it: no signature, a wrong one, a stale timestamp, an altered
// body. Forgeries are signed here with node:crypto, independently of the sidecar's signer.

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const KEY = 'forward-verifiers-key';
const APP_SECRET = 'forward-verifiers-app-secret-0123456789';
const work = mkdtempSync(join(tmpdir(), 'forward-verifiers-'));
const secretFile = join(work, 'app-signing-secret');

/** One app under test: where it listens, and what it printed (one line per request it judged). */
interface App {
  readonly url: string;
  lines(): string[];
  close(): Promise<void>;
}

/** The documented TypeScript handler: verifyForwardedEvent on the raw bytes, 401 for anything else. */
async function typescriptApp(): Promise<App> {
  const secrets = signingSecretsFrom(`${APP_SECRET}\n`);
  const lines: string[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const r = verifyForwardedEvent({ headers: req.headers, rawBody: Buffer.concat(chunks), secrets });
      lines.push(r.verified ? `verified ${r.event.id} ${r.event.type}` : `refused ${r.reason}`);
      res.writeHead(r.verified ? 204 : 401).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`,
    lines: () => [...lines],
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** One of docs/clients/'s verifiers as a server: `<argv…> <port> <secret file>`; it prints `listening <port>`. */
async function processApp(argv: string[]): Promise<App> {
  const child: ChildProcess = spawn(argv[0]!, [...argv.slice(1), '0', secretFile], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const port = await new Promise<number>((resolve, reject) => {
    const seen = (): void => {
      const m = /^listening (\d+)$/m.exec(out);
      if (m) resolve(Number(m[1]));
    };
    child.stdout!.on('data', seen);
    child.once('exit', (code) => reject(new Error(`${argv.join(' ')} exited ${code} before listening:\n${out}`)));
  });
  return {
    url: `http://127.0.0.1:${port}/webhooks`,
    lines: () => out.split('\n').filter((l) => l.startsWith('verified') || l.startsWith('refused')),
    close: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGKILL');
      }),
  };
}

const APPS: Record<string, () => Promise<App>> = {
  typescript: typescriptApp,
  python: () => processApp([PYTHON, join(ROOT, 'docs/clients/verify_forward.py')]),
  go: () => processApp([join(work, 'verify_forward')]),
  java: () => processApp(['java', '-XX:TieredStopAtLevel=1', '-XX:+UseSerialGC', '-cp', join(work, 'java'), 'VerifyForward']),
};

let sim: SimulatorHandle;
let redis: TestRedis;
let n = 0;

beforeAll(async () => {
  requireToolchains();
  buildWith(['go', 'build', '-o', join(work, 'verify_forward'), 'docs/clients/verify_forward.go']);
  buildWith(['javac', '-d', join(work, 'java'), 'docs/clients/VerifyForward.java']);
  writeFileSync(secretFile, `# the pod's app signing secret, as the chart mounts it\n${APP_SECRET}\n`);
  sim = await startSimulator({ apiKey: KEY });
  // A REDEC obligation pending at the service: each sidecar below hands it to its app (no grace).
  sim.revokeConsent({ userReference: 'alice', configKey: 'credit-report' });
  redis = await getTestRedis();
}, 300_000);
afterAll(async () => {
  await sim?.close();
  await redis?.stop();
  rmSync(work, { recursive: true, force: true });
});

/** A sidecar signing its forwards with the file the apps verify with. */
async function sidecar(appUrl: string, extra: Record<string, string>): Promise<TestSidecar> {
  return startTestSidecar(sim.url, {
    'api-key': KEY,
    'app-webhook-url': appUrl,
    'webhook-secret': SECRET_A,
    'webhook-listen': '127.0.0.1:0',
    'app-signing-secret-file': secretFile,
    ...extra,
  });
}

/** One delivery of a fresh event, as the service signs it, to the sidecar's ingress. */
async function deliver(s: TestSidecar, id: string): Promise<unknown> {
  const body = JSON.stringify({ id, sequence: ++n, type: 'consent_action.created', occurredAt: Date.now(), data: { userReference: 'bob', configKey: 'marketing-email', action: 'revoke' } });
  const res = await fetch(`${s.handle.urls.webhook}/webhooks`, { method: 'POST', headers: deliveryHeaders(SECRET_A, Math.floor(Date.now() / 1000), body, id), body });
  return res.json();
}

const hmac = (secret: string, ts: number, body: string): string => `v1=${createHmac('sha256', secret).update(`${ts}.${body}`).digest('hex')}`;

/** Posts straight to the app, past the sidecar; resolves with the app's status. */
async function post(url: string, body: string, headers: Record<string, string>): Promise<number> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  await res.arrayBuffer();
  return res.status;
}

describe.each(Object.keys(APPS))('an app verifying forwards (%s)', (lang) => {
  let app: App;
  const sidecars: TestSidecar[] = [];
  beforeAll(async () => {
    app = await APPS[lang]!();
  }, 120_000);
  afterAll(async () => {
    await Promise.allSettled(sidecars.map((s) => s.close()));
    await app?.close();
  });

  it('takes a genuine forward in passthrough mode and the REDEC hand-over', async () => {
    const s = await sidecar(app.url, { 'redec-reconcile-interval-ms': '100', 'redec-reconcile-grace-ms': '0' });
    sidecars.push(s);
    const id = `evt_${lang}_passthrough`;
    // 200 accepted only once the app answered 2xx: the app verified it.
    expect(await deliver(s, id)).toEqual({ status: 'accepted' });
    await vi.waitFor(() => s.metric('consent_sidecar_redec_handed_to_app_total', { outcome: 'accepted' }).then((v) => expect(v).toBeGreaterThanOrEqual(1)), PATIENTLY);
    expect(await s.metric('consent_sidecar_redec_handed_to_app_total', { outcome: 'failed' })).toBe(0);
    expect(app.lines().filter((l) => l.startsWith('verified')).length).toBeGreaterThanOrEqual(2);
  });

  it('takes a genuine forward in queue mode', async () => {
    const s = await sidecar(app.url, { 'webhook-delivery': 'queue', 'redis-url': redis.url, 'redis-key-prefix': redis.prefix() });
    sidecars.push(s);
    expect(await deliver(s, `evt_${lang}_queued`)).toEqual({ status: 'queued' });
    await vi.waitFor(() => s.metric('consent_sidecar_webhook_queue_forwards_total', { outcome: 'delivered' }).then((v) => expect(v).toBe(1)), PATIENTLY);
    expect(await s.metric('consent_sidecar_webhook_queue_forwards_total', { outcome: 'retry_scheduled' })).toBe(0);
  });

  it('refuses every forgery posted straight to it: no signature, a wrong one, a stale timestamp, an altered body', async () => {
    const before = app.lines().filter((l) => l.startsWith('refused')).length;
    const body = JSON.stringify({ id: `evt_${lang}_forged`, sequence: 1, type: 'consent_action.created', occurredAt: Date.now(), data: { userReference: 'mallory', action: 'grant' } });
    const now = Math.floor(Date.now() / 1000);
    const forgeries: Record<string, Record<string, string>> = {
      // What a sender that knows the docs but not the secret writes.
      'no signature': { 'x-consent-sidecar-verified': 'v1', 'x-service-event-id': `evt_${lang}_forged` },
      'a wrong signature': { 'x-consent-sidecar-timestamp': String(now), 'x-consent-sidecar-signature': hmac('not-the-pods-secret-0123456789abcdef', now, body) },
      'a stale timestamp': { 'x-consent-sidecar-timestamp': String(now - 301), 'x-consent-sidecar-signature': hmac(APP_SECRET, now - 301, body) },
      // Well past the tolerance ahead: the app reads its clock later than `now` (a JVM on a busy
      // machine, seconds later), which brings a timestamp only just ahead back inside it.
      'a timestamp from the future': { 'x-consent-sidecar-timestamp': String(now + 900), 'x-consent-sidecar-signature': hmac(APP_SECRET, now + 900, body) },
    };
    for (const [what, headers] of Object.entries(forgeries)) expect(await post(app.url, body, headers), what).toBe(401);
    // A genuine signature over another body: the body altered in flight.
    const genuine = { 'x-consent-sidecar-timestamp': String(now), 'x-consent-sidecar-signature': hmac(APP_SECRET, now, body) };
    expect(await post(app.url, body.replace('"grant"', '"revoke"'), genuine), 'an altered body').toBe(401);
    // The control: the same genuine signature over the body it signs is taken.
    expect(await post(app.url, body, genuine)).toBe(204);
    expect(app.lines().filter((l) => l.startsWith('refused')).length - before).toBe(5);
  });
});
