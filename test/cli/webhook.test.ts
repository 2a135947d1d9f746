import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runCli } from '../helpers/cli.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/index.js';
import { FIXTURES, loadVectors, SECRET_A, SECRET_B, sign, startApp, VECTOR_TS } from '../helpers/webhooks.js';
import { getTestRedis } from '../helpers/redis.js';
import { startSimulator, type SimulatorHandle } from '../../src/simulator/index.js';
import { startTestSidecar, type TestSidecar } from '../helpers/sidecar.js';

const fixture = (name: string): string => fileURLToPath(new URL(name, FIXTURES));

/** The real CLI entry point in a child process, as an operator runs it (slow: used sparingly). */
const spawnCli = (args: readonly string[], stdin?: Buffer | string) => runCli(['webhook', ...args], {}, 'dist', stdin);

/** The CLI's `main` in this process, capturing what it writes; no stdin. */
async function cli(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const out = vi.spyOn(process.stdout, 'write').mockImplementation((c: string | Uint8Array) => ((stdout += String(c)), true));
  const err = vi.spyOn(process.stderr, 'write').mockImplementation((c: string | Uint8Array) => ((stderr += String(c)), true));
  try {
    process.exitCode = undefined;
    await main(['node', 'consent-sidecar', 'webhook', ...args]);
    return { code: Number(process.exitCode ?? 0), stdout, stderr };
  } finally {
    out.mockRestore();
    err.mockRestore();
    process.exitCode = undefined;
  }
}

afterEach(() => {
  process.exitCode = undefined;
});

const vector = loadVectors().find((v) => v.file === 'unicode-whitespace.json' && v.secret === SECRET_B)!;
const vectorHeaders = ['--header', `x-service-timestamp: ${vector.timestamp}`, '--header', `x-service-signature: v1=${vector.hex}`];
const at = ['--now', String(VECTOR_TS + 10)];

describe('webhook verify', () => {
  it('an openssl vector with a rotated secret → ok, exit 0', async () => {
    const r = await cli(['verify', '--secret', SECRET_A, '--secret', SECRET_B, ...vectorHeaders, '--body-file', fixture(vector.file), ...at]);
    expect(r).toMatchObject({ code: 0, stdout: 'ok\n' });
    expect(r.stderr).toContain('secret #1 matched');
  });

  it('the body on stdin works the same (real entry point)', async () => {
    const r = await spawnCli(['verify', '--secret', SECRET_B, ...vectorHeaders, ...at], vector.body);
    expect(r).toMatchObject({ code: 0, stdout: 'ok\n' });
  });

  it.each([
    ['stale at the real clock', ['--secret', SECRET_B, ...vectorHeaders], 'ERR_WEBHOOK_TIMESTAMP_TOO_OLD'],
    ['wrong secret', ['--secret', SECRET_A, ...vectorHeaders, ...at], 'ERR_WEBHOOK_SIGNATURE_MISMATCH'],
    ['no signature', ['--secret', SECRET_B, '--header', `x-service-timestamp: ${VECTOR_TS}`, ...at], 'ERR_WEBHOOK_SIGNATURE_MISSING'],
    ['no timestamp', ['--secret', SECRET_B, '--header', `x-service-signature: v1=${vector.hex}`, ...at], 'ERR_WEBHOOK_TIMESTAMP_MISSING'],
    ['scheme', ['--secret', SECRET_B, '--header', `x-service-timestamp: ${VECTOR_TS}`, '--header', 'x-service-signature: sha256=00', ...at], 'ERR_WEBHOOK_SIGNATURE_SCHEME'],
    ['required header', ['--secret', SECRET_B, ...vectorHeaders, ...at, '--required-header', 'X-Tenant: t'], 'ERR_WEBHOOK_REQUIRED_HEADER_MISSING'],
  ])('%s → reason code, exit 1', async (_name, args, code) => {
    const r = await cli(['verify', ...args, '--body-file', fixture(vector.file)]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe(`${code}\n`);
  });

  it('a verified body that is not an envelope → ERR_WEBHOOK_INVALID_ENVELOPE', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wh-'));
    writeFileSync(join(dir, 'b'), '[1,2]');
    const r = await cli(['verify', '--secret', SECRET_A, '--header', `x-service-timestamp: ${VECTOR_TS}`, '--header', `x-service-signature: ${sign(SECRET_A, VECTOR_TS, '[1,2]')}`, '--body-file', join(dir, 'b'), ...at]);
    expect(r).toMatchObject({ code: 1, stdout: 'ERR_WEBHOOK_INVALID_ENVELOPE\n' });
  });

  it.each([
    ['no secret', ['verify', ...vectorHeaders], '--secret'],
    ['a secret without whsec_', ['verify', '--secret', 'abc', ...vectorHeaders], '--secret'],
    ['no headers', ['verify', '--secret', SECRET_A], '--header'],
    ['malformed header', ['verify', '--secret', SECRET_A, '--header', 'nocolon'], '--header'],
    ['bad tolerance', ['verify', '--secret', SECRET_A, ...vectorHeaders, '--tolerance-s', 'soon'], '--tolerance-s'],
    ['bad now', ['verify', '--secret', SECRET_A, ...vectorHeaders, '--now', '12:00'], '--now'],
    ['bad timestamp to sign', ['sign', '--secret', SECRET_A, '--timestamp', 'x'], '--timestamp'],
  ])('usage: %s → exit 2 naming the flag', async (_name, args, flag) => {
    const r = await cli([...args, '--body-file', fixture(vector.file)]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(flag);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});

describe('webhook sign', () => {
  it('prints the same signature openssl computed', async () => {
    const v = loadVectors().find((x) => x.file === 'revoke.json' && x.secret === SECRET_A)!;
    const r = await cli(['sign', '--secret', SECRET_A, '--timestamp', String(v.timestamp), '--body-file', fixture(v.file)]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`x-service-signature: v1=${v.hex}\n`);
    expect(r.stdout).toContain(`x-service-timestamp: ${v.timestamp}\n`);
    expect(r.stdout).toContain('x-service-event-id: evt_01JREVOKE0001\n');
  });

  it('sign → headers file → verify round trip, body on stdin, with a curl line', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wh-'));
    const signed = await spawnCli(['sign', '--secret', SECRET_B, '--curl', 'http://127.0.0.1:7701/webhooks'], vector.body);
    expect(signed.code).toBe(0);
    const [headerBlock, curl] = [signed.stdout.split('\ncurl ')[0]!, signed.stdout.split('\ncurl ')[1]!];
    expect(curl).toContain("--data-binary '@-' 'http://127.0.0.1:7701/webhooks'");
    writeFileSync(join(dir, 'headers.txt'), `POST /webhooks HTTP/1.1\n${headerBlock}\n\n${vector.body.toString('latin1')}`);
    const r = await cli(['verify', '--secret', SECRET_B, '--headers-file', join(dir, 'headers.txt'), '--body-file', fixture(vector.file)]);
    expect(r).toMatchObject({ code: 0, stdout: 'ok\n' });
  });
});

describe('webhook trigger says what the endpoints answered', () => {
  let sim: SimulatorHandle | undefined;
  let sidecar: TestSidecar | undefined;
  afterEach(async () => {
    await sidecar?.close();
    await sim?.close();
    [sim, sidecar] = [undefined, undefined];
  });

  it('no endpoint registered: nobody received the event, exit 1, saying how to register one', async () => {
    sim = await startSimulator();
    const r = await spawnCli(['trigger', 'consent_action.created', '--simulator', sim.url]);
    expect(r.code).toBe(1);
    expect((JSON.parse(r.stdout) as { type: string }).type).toBe('consent_action.created');
    expect(r.stderr).toContain('no webhook endpoint is registered at the simulator, so nobody received the event');
    expect(r.stderr).toContain('--webhook-endpoint');
  });

  it("the sidecar refuses the delivery (the endpoint's secret is not the sidecar's): its 401 is printed, exit 1", async () => {
    sim = await startSimulator();
    sidecar = await startTestSidecar(sim.url, {
      'webhook-listen': '127.0.0.1:0',
      'app-webhook-url': 'http://127.0.0.1:9/webhooks',
      'webhook-secret': SECRET_A,
    });
    const url = `${sidecar.handle.urls.webhook}/webhooks`;
    sim.registerWebhookEndpoint({ url, secret: SECRET_B });
    const r = await spawnCli(['trigger', 'consent_action.created', '--simulator', sim.url]);
    expect(r.code).toBe(1);
    // What the sidecar said, its reason, not only the status.
    expect(r.stderr).toBe(`we_1 ${url} answered 401 signature_mismatch: refused: signature, timestamp or required header\n`);
  });

  it('says what the sidecar said: accepted, then duplicate on a resend; queued in queue mode', async () => {
    sim = await startSimulator();
    const app = await startApp();
    try {
      sidecar = await startTestSidecar(sim.url, { 'webhook-listen': '127.0.0.1:0', 'app-webhook-url': app.url, 'webhook-secret': SECRET_A });
      const url = `${sidecar.handle.urls.webhook}/webhooks`;
      sim.registerWebhookEndpoint({ url, secret: SECRET_A });
      const sent = await spawnCli(['trigger', 'consent_action.created', '--simulator', sim.url]);
      expect(sent.code, sent.stderr).toBe(0);
      expect(sent.stderr).toBe(`we_1 ${url} answered 200 accepted: the app has it\n`);
      const again = await spawnCli(['resend', (JSON.parse(sent.stdout) as { id: string }).id, '--simulator', sim.url]);
      expect(again.code, again.stderr).toBe(0);
      expect(again.stderr).toBe(`we_1 ${url} answered 200 duplicate: accepted before: not forwarded again\n`);
      await sidecar.close();
      await sim.close();

      const redis = await getTestRedis();
      sim = await startSimulator();
      try {
        sidecar = await startTestSidecar(sim.url, { 'webhook-listen': '127.0.0.1:0', 'app-webhook-url': app.url, 'webhook-secret': SECRET_A, 'webhook-delivery': 'queue', 'redis-url': redis.url, 'redis-key-prefix': redis.prefix() });
        const queueUrl = `${sidecar.handle.urls.webhook}/webhooks`;
        sim.registerWebhookEndpoint({ url: queueUrl, secret: SECRET_A });
        const queued = await spawnCli(['trigger', 'consent_action.created', '--simulator', sim.url]);
        expect(queued.code, queued.stderr).toBe(0);
        expect(queued.stderr).toBe(`we_1 ${queueUrl} answered 200 queued: in the queue (Redis): a worker forwards it to the app\n`);
        await sidecar.close();
      } finally {
        await redis.stop();
      }
    } finally {
      await app.close();
    }
  });
});

describe('usage errors from the real entry point', () => {
  it.each([
    ['missing body file', ['verify', '--secret', SECRET_A, ...vectorHeaders, '--body-file', '/nonexistent/x'], '--body-file'],
    ['unknown flag', ['verify', '--sekret', SECRET_A], '--sekret'],
  ])('%s → exit 2 naming the flag, no stack trace', async (_name, args, flag) => {
    const r = await spawnCli(args, '{}');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(flag);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});
