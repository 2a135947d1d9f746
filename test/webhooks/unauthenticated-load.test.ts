import { connect, type Socket } from 'node:net';
import { createLogger } from '../../src/observability/logger.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { WebhookConfig } from '../../src/config/index.js';
import { createRegistry } from '../../src/observability/index.js';
import { deliveryHeaders, envelope, metricValue, nowS, post, RecordingRevocations, SECRET_A, startApp, startWebhookListener, webhookConfig, type FakeApp } from '../helpers/webhooks.js';

// Issue 8, item 3: what an unauthenticated sender can make the ingress hold, and for how long.

let app: FakeApp | undefined;
let closeListener: (() => Promise<void>) | undefined;
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await closeListener?.();
  await app?.close();
  app = closeListener = undefined;
});

async function start(overrides: Partial<WebhookConfig> & { maxBodyBytes?: number } = {}) {
  app = await startApp();
  const logs: Record<string, unknown>[] = [];
  const logger = createLogger('debug', { write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>) });
  const registry = createRegistry({ defaultMetrics: false });
  const listener = await startWebhookListener({
    // Every sender here is 127.0.0.1: one peer, allowed the whole budget unless the test says otherwise.
    config: { ...webhookConfig({ appUrl: app.url, maxBodyBytes: 4096 }), ...overrides, maxUnverifiedBytesPerPeer: overrides.maxUnverifiedBytesPerPeer ?? overrides.maxUnverifiedBytes ?? 16_777_216 },
    logger,
    registry,
    revocations: new RecordingRevocations(),
  });
  closeListener = () => listener.close();
  return { url: listener.url, port: listener.port, registry, logs };
}

/** A hostile delivery: fresh timestamp, made-up signature, `declared` bytes announced, `sent` pushed. */
function hostile(port: number, declared: number | 'chunked', sent: number): { socket: Socket; answer: Promise<string> } {
  const socket = connect(port, '127.0.0.1');
  sockets.push(socket);
  let data = '';
  const answer = new Promise<string>((resolve) => {
    socket.on('data', (d: Buffer) => {
      data += d.toString('latin1');
      const m = /^HTTP\/1\.1 (\d{3})[\s\S]*\r\n\r\n([\s\S]*)$/.exec(data);
      if (m && m[2]!.includes('}')) resolve(`${m[1]} ${m[2]}`);
    });
    socket.on('close', () => resolve(data === '' ? 'closed' : data));
    socket.on('error', () => undefined);
  });
  const length = declared === 'chunked' ? 'transfer-encoding: chunked' : `content-length: ${declared}`;
  socket.write(`POST /webhooks HTTP/1.1\r\nhost: x\r\n${length}\r\nx-service-timestamp: ${nowS()}\r\nx-service-signature: v1=${'0'.repeat(64)}\r\n\r\n`);
  const body = Buffer.alloc(sent, 0x61);
  socket.write(declared === 'chunked' ? Buffer.concat([Buffer.from(`${sent.toString(16)}\r\n`), body, Buffer.from('\r\n')]) : body);
  return { socket, answer };
}

/** vitest's own polling, for a condition that may be async. */
const until = (cond: () => Promise<boolean> | boolean): Promise<void> => vi.waitFor(async () => expect(await cond()).toBe(true), { timeout: 15_000, interval: 10 });

describe('--webhook-max-unverified-bytes', () => {
  // The bytes held are counted as they arrive, so the budget fills with bytes actually sent.
  it('holds at most the budget across all connections; beyond it 503 and the connection is closed; a genuine delivery passes once they go', async () => {
    const s = await start({ maxUnverifiedBytes: 8192, minBodyRateBytes: 0 });
    const a = hostile(s.port, 4096, 4095);
    const b = hostile(s.port, 4096, 4095);
    await until(async () => (await metricValue(s.registry, 'consent_sidecar_webhook_unverified_bytes')) === 8190);
    const c = hostile(s.port, 4096, 4095);
    expect(await c.answer).toMatch(/^503 .*unverified_budget_exhausted/);
    await until(() => c.socket.destroyed || c.socket.readableEnded);
    expect(await metricValue(s.registry, 'consent_sidecar_webhook_rejections_total', { reason: 'unverified_budget_exhausted' })).toBe(1);

    // A genuine delivery, smaller than what the largest holder holds, takes its place: that holder
    // is cut (503, closed) and the delivery accepted. (It used to be refused too: 503 while the
    // attackers held the budget, which let 16 idle connections shut webhooks off.)
    const body = envelope({ id: 'evt_genuine' });
    expect((await post(s.url, body, deliveryHeaders(SECRET_A, nowS(), body))).status).toBe(200);
    const cut = await Promise.race([a.answer, b.answer]);
    expect(cut).toMatch(/^503 .*unverified_budget_exhausted/);
    expect(await metricValue(s.registry, 'consent_sidecar_webhook_rejections_total', { reason: 'unverified_budget_exhausted' })).toBe(2);

    a.socket.destroy();
    b.socket.destroy();
    await until(async () => (await metricValue(s.registry, 'consent_sidecar_webhook_unverified_bytes')) === 0);
    const again = envelope({ id: 'evt_genuine_2' });
    const retry = await post(s.url, again, deliveryHeaders(SECRET_A, nowS(), again));
    expect(retry.status).toBe(200);
    expect(app!.received.map((r) => r.headers['x-service-event-id'])).toEqual(['evt_genuine', 'evt_genuine_2']);
  });

  it('a declared length holds nothing: 16 idle connections declaring 1 MiB each, renewed when cut, leave every genuine delivery accepted', async () => {
    const s = await start({ maxUnverifiedBytes: 16_777_216, maxBodyBytes: 1_048_576 });
    let attacking = true;
    const attackers = Array.from({ length: 16 }, async () => {
      while (attacking) {
        const h = hostile(s.port, 1_048_576, 0);
        await h.answer;
      }
    });
    // The attackers are connected, their headers sent, before the genuine deliveries start.
    await until(() => sockets.filter((k) => !k.connecting && !k.destroyed).length >= 16);
    let accepted = 0;
    for (let i = 0; i < 20; i++) {
      const body = envelope({ id: `evt_under_attack_${i}`, sequence: i + 1 });
      if ((await post(s.url, body, deliveryHeaders(SECRET_A, nowS(), body))).status === 200) accepted++;
    }
    attacking = false;
    for (const sk of sockets) sk.destroy();
    await Promise.all(attackers);
    expect(accepted).toBeGreaterThanOrEqual(19);
    expect(await metricValue(s.registry, 'consent_sidecar_webhook_rejections_total', { reason: 'unverified_budget_exhausted' })).toBe(0);
  });

  it('a body slower than --webhook-min-body-rate-bytes is cut: 503 body_too_slow, its bytes given back, the connection closed', async () => {
    const s = await start({ minBodyRateBytes: 1024, bodyTimeoutMs: 600_000 });
    const slow = hostile(s.port, 4096, 10);
    expect(await slow.answer).toMatch(/^503 .*body_too_slow/);
    await until(() => slow.socket.destroyed || slow.socket.readableEnded);
    expect(await metricValue(s.registry, 'consent_sidecar_webhook_unverified_bytes')).toBe(0);
    expect(await metricValue(s.registry, 'consent_sidecar_webhook_rejections_total', { reason: 'body_too_slow' })).toBe(1);
  });

  it('one sender address holds at most its share (--webhook-peer-max-unverified): a second holder of the same size is refused', async () => {
    const s = await start({ maxUnverifiedBytes: 16_384, maxUnverifiedBytesPerPeer: 4096, minBodyRateBytes: 0 });
    const a = hostile(s.port, 4096, 4095);
    await until(async () => (await metricValue(s.registry, 'consent_sidecar_webhook_unverified_bytes')) === 4095);
    const b = hostile(s.port, 4096, 4095);
    expect(await b.answer).toMatch(/^503 .*unverified_budget_exhausted/);
    a.socket.destroy();
  });

  it('counts a chunked body (no content-length) chunk by chunk', async () => {
    const s = await start({ maxUnverifiedBytes: 4096, minBodyRateBytes: 0 });
    const a = hostile(s.port, 'chunked', 3000);
    await until(async () => (await metricValue(s.registry, 'consent_sidecar_webhook_unverified_bytes')) === 3000);
    const b = hostile(s.port, 'chunked', 3000);
    expect(await b.answer).toMatch(/^503 .*unverified_budget_exhausted/);
    a.socket.destroy();
    await until(async () => (await metricValue(s.registry, 'consent_sidecar_webhook_unverified_bytes')) === 0);
  });

  it('a verified or refused body gives its bytes back', async () => {
    const s = await start({ maxUnverifiedBytes: 4096 });
    for (let i = 0; i < 5; i++) {
      const body = envelope({ id: `evt_${i}`, data: { pad: 'x'.repeat(3000) } });
      expect((await post(s.url, body, deliveryHeaders(SECRET_A, nowS(), body))).status).toBe(200);
      expect((await post(s.url, body, { ...deliveryHeaders(SECRET_A, nowS(), body), 'x-service-signature': `v1=${'1'.repeat(64)}` })).status).toBe(401);
    }
    expect(await metricValue(s.registry, 'consent_sidecar_webhook_unverified_bytes')).toBe(0);
  });

  it('is refused at start when smaller than --webhook-max-body-bytes', async () => {
    const { loadServeConfig, ConfigError } = await import('../../src/config/index.js');
    const flags = { 'upstream-url': 'http://127.0.0.1:9', 'api-key': 'k', 'app-webhook-url': 'http://127.0.0.1:8/h', 'webhook-secret': SECRET_A };
    expect(() => loadServeConfig({ ...flags, 'webhook-max-unverified-bytes': '2048', 'webhook-max-body-bytes': '4096' }, {})).toThrow(ConfigError);
    try {
      loadServeConfig({ ...flags, 'webhook-max-unverified-bytes': '2048', 'webhook-max-body-bytes': '4096' }, {});
    } catch (err) {
      expect(String((err as Error).message)).toContain('--webhook-max-unverified-bytes');
    }
  });
});

describe('--webhook-body-timeout-ms', () => {
  it('a body that does not arrive in time gets 503 body_timeout, its bytes are given back and the connection closed', async () => {
    const s = await start({ bodyTimeoutMs: 200 });
    const a = hostile(s.port, 4096, 100);
    expect(await a.answer).toMatch(/^503 .*body_timeout/);
    await until(() => a.socket.destroyed || a.socket.readableEnded);
    expect(await metricValue(s.registry, 'consent_sidecar_webhook_unverified_bytes')).toBe(0);
    expect(await metricValue(s.registry, 'consent_sidecar_webhook_rejections_total', { reason: 'body_timeout' })).toBe(1);
  });
});

describe('rejection logs', () => {
  it('are rate limited per reason and carry the remote address', async () => {
    const s = await start();
    const body = envelope();
    for (let i = 0; i < 20; i++) {
      const r = await post(s.url, body, { ...deliveryHeaders(SECRET_A, nowS(), body), 'x-service-signature': `v1=${'1'.repeat(64)}` });
      expect(r.status).toBe(401);
    }
    const lines = s.logs.filter((l) => l.event === 'webhook_rejected');
    // 20 refusals in well under the interval: the first is logged, the rest are counted.
    expect(lines.length).toBeGreaterThanOrEqual(1);
    expect(lines.length).toBeLessThan(20);
    expect(lines[0]).toMatchObject({ reason: 'signature_mismatch', remoteAddress: '127.0.0.1', suppressedSinceLast: 0 });
    expect(await metricValue(s.registry, 'consent_sidecar_webhook_rejections_total', { reason: 'signature_mismatch' })).toBe(20);
  });
});

describe('a crash inside the handler', () => {
  it('answers 503 (the service retries), never 500, and the listener keeps serving', async () => {
    let broken = true;
    const good = webhookConfig({ appUrl: 'http://127.0.0.1:9/h' }).secrets;
    const secrets = { ...good, current: () => (broken ? (() => { throw new Error('secret store exploded'); })() : good.current()) } as WebhookConfig['secrets'];
    const s = await start({ secrets });
    const body = envelope({ id: 'evt_crash' });
    const first = await post(s.url, body, deliveryHeaders(SECRET_A, nowS(), body));
    expect(first.status).toBe(503);
    expect(JSON.parse(first.body)).toEqual({ error: 'internal_error' });
    broken = false;
    expect((await post(s.url, body, deliveryHeaders(SECRET_A, nowS(), body))).status).toBe(200);
  });
});

describe('readUnverifiedBody', () => {
  it('a verifier that throws rejects the read (no crash from inside a stream event) and gives the bytes back', async () => {
    const { createServer } = await import('node:http');
    const { readUnverifiedBody, SlowBodyWatch, UnverifiedBudget } = await import('../../src/webhooks/index.js');
    const { DeadlineQueue } = await import('../../src/lib/deadline-queue.js');
    const deadlines = new DeadlineQueue();
    const budget = new UnverifiedBudget(4096);
    for (const where of ['update', 'finish'] as const) {
      const outcome = await new Promise<string>((resolve) => {
        const server = createServer((req, res) => {
          const verifier = {
            update: () => {
              if (where === 'update') throw new Error('update exploded');
            },
            finish: (): never => {
              throw new Error('finish exploded');
            },
          };
          readUnverifiedBody(req, { maxBytes: 4096, budget, timeoutMs: 5000, deadlines, rates: new SlowBodyWatch(0, 0), verifier }).then(
            () => resolve('resolved'),
            (err: Error) => resolve(`rejected: ${err.message}`),
          );
          res.on('close', () => server.close());
          setTimeout(() => res.end(), 10);
        });
        server.listen(0, '127.0.0.1', () => {
          const { port } = server.address() as { port: number };
          void fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body: 'x'.repeat(100) }).catch(() => undefined);
        });
      });
      expect(outcome).toBe(`rejected: ${where} exploded`);
      expect(budget.used).toBe(0);
    }
  });
});
