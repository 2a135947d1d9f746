import { describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../../src/observability/index.js';
import { createRegistry } from '../../src/observability/registry.js';
import {
  backoffMs,
  createQueueMetrics,
  createRedisMetrics,
  DEAD_LETTER_PAGE,
  listDeadLetters,
  QUEUE_BACKOFF_MAX_MS,
  QueueKeys,
  RedisConnection,
  RedisError,
  RedisKeyspace,
  RedisWebhookQueue,
  replayDeadLetters,
} from '../../src/redis/index.js';
import { useTestRedis } from '../helpers/redis.js';
import { startApp, type FakeApp } from '../webhooks/helpers.js';

/**
 * The queue's pieces against a real Redis, in process (the scenarios with real `serve` processes
 * are in test/e2e/queue-mode.test.ts). No timed assertions: waits poll for an outcome.
 */
const fx = useTestRedis();
const { opened } = fx;

async function connection(url = fx.redis.url): Promise<RedisConnection> {
  const conn = new RedisConnection({ url: () => url, commandTimeoutMs: 1000, logger: silentLogger(), metrics: createRedisMetrics(createRegistry({ defaultMetrics: false })), healthIntervalMs: 100 });
  opened.push(conn);
  conn.start();
  if (url === fx.redis.url) await vi.waitFor(() => expect(conn.isUp).toBe(true), { timeout: 5000 });
  return conn;
}

async function app(): Promise<FakeApp> {
  const a = await startApp();
  opened.push(a);
  return a;
}

async function queue(prefix: string, appUrl: string, o: { horizonMs?: number; url?: string; staleConsumerMs?: number } = {}) {
  const conn = await connection(o.url);
  const registry = createRegistry({ defaultMetrics: false });
  const q = new RedisWebhookQueue({
    connection: conn,
    keyspace: new RedisKeyspace(prefix),
    logger: silentLogger(),
    metrics: createQueueMetrics(registry),
    appUrl: new URL(appUrl),
    forwardTimeoutMs: 1000,
    visibilityMs: 2000,
    horizonMs: o.horizonMs ?? 60_000,
    deliveredRetentionMs: 60_000,
    now: Date.now,
    ...(o.staleConsumerMs === undefined ? {} : { staleConsumerMs: o.staleConsumerMs }),
  });
  await q.start();
  opened.push({ close: () => q.stop() });
  return { q, conn, registry, keys: new QueueKeys(new RedisKeyspace(prefix)) };
}

const event = (id: string) => ({ id, type: 'test.event', headers: { 'content-type': 'application/json', 'x-service-event-id': id, 'x-consent-sidecar-verified': 'v1' }, body: Buffer.from(`{"id":"${id}"}`) });
let n = 0;
const prefix = (): string => `${fx.redis.prefix()}q${++n}:`;

describe('backoffMs', () => {
  it.each([
    [1, 800, 1200],
    [2, 1600, 2400],
    [5, 12_800, 19_200],
    [12, QUEUE_BACKOFF_MAX_MS, QUEUE_BACKOFF_MAX_MS],
    [1000, QUEUE_BACKOFF_MAX_MS, QUEUE_BACKOFF_MAX_MS],
  ])('after %i failures: between %i and %i ms', (attempts, lo, hi) => {
    expect(backoffMs(attempts, () => 0)).toBe(Math.min(lo, QUEUE_BACKOFF_MAX_MS));
    expect(backoffMs(attempts, () => 0.999999)).toBeLessThanOrEqual(hi);
    expect(backoffMs(attempts, () => 0.999999)).toBeGreaterThanOrEqual(hi - 1);
  });
});

describe('RedisWebhookQueue', () => {
  it('refuses a visibility timeout not above the forward timeout (a slow app would get two copies)', async () => {
    const conn = await connection();
    expect(
      () =>
        new RedisWebhookQueue({
          connection: conn,
          keyspace: new RedisKeyspace('x:'),
          logger: silentLogger(),
          metrics: createQueueMetrics(createRegistry({ defaultMetrics: false })),
          appUrl: new URL('http://127.0.0.1:1/h'),
          forwardTimeoutMs: 1000,
          visibilityMs: 1000,
          horizonMs: 1,
          deliveredRetentionMs: 1,
          now: Date.now,
        }),
    ).toThrow(RangeError);
  });

  it('forwards the raw body with the stored headers, then leaves nothing behind but the delivered marker', async () => {
    const a = await app();
    const p = prefix();
    const { q, registry } = await queue(p, a.url);
    const body = Buffer.from([0x7b, 0x22, 0x69, 0x64, 0x22, 0x3a, 0x22, 0xc3, 0xa9, 0x22, 0x7d]); // {"id":"é"}, bytes kept
    await q.enqueue({ ...event('evt_raw'), body });
    await vi.waitFor(() => expect(a.received).toHaveLength(1), { timeout: 5000 });
    expect(a.received[0]!.body.equals(body)).toBe(true);
    expect(a.received[0]!.headers).toMatchObject({ 'x-service-event-id': 'evt_raw', 'x-consent-sidecar-verified': 'v1' });
    await vi.waitFor(async () => expect(Number(await fx.admin.sendCommand(['XLEN', `${p}queue:events`]))).toBe(0), { timeout: 3000 });
    expect(Number(await fx.admin.sendCommand(['ZCARD', `${p}queue:born`]))).toBe(0);
    expect(Number(await fx.admin.sendCommand(['EXISTS', `${p}queue:delivered:evt_raw`]))).toBe(1);
    expect(Number(await fx.admin.sendCommand(['PTTL', `${p}queue:delivered:evt_raw`]))).toBeGreaterThan(50_000);
    const forwards = await registry.getSingleMetric('consent_sidecar_webhook_queue_forwards_total')!.get();
    expect(forwards.values.find((v) => v.labels.outcome === 'delivered')?.value).toBe(1);
  });

  it('a refused event is retried after its backoff, with the attempt and last error kept', async () => {
    const a = await app();
    a.behaviour = { status: 503 };
    const p = prefix();
    const { q } = await queue(p, a.url);
    await q.enqueue(event('evt_retry'));
    await vi.waitFor(async () => expect(Number(await fx.admin.sendCommand(['ZCARD', `${p}queue:delayed`]))).toBe(1), { timeout: 5000 });
    const [member] = (await fx.admin.sendCommand(['ZRANGE', `${p}queue:delayed`, '0', '0'])) as string[];
    expect(JSON.parse(member!)).toMatchObject({ id: 'evt_retry', attempts: 1, lastError: 'app answered 503' });
    a.behaviour = { status: 204 };
    await vi.waitFor(() => expect(a.received.length).toBe(2), { timeout: 5000 });
    await vi.waitFor(async () => expect(Number(await fx.admin.sendCommand(['ZCARD', `${p}queue:born`]))).toBe(0), { timeout: 3000 });
  });

  it('past the horizon: a dead letter; list shows it; two replays at once move it once', async () => {
    const a = await app();
    a.behaviour = { status: 500 };
    const p = prefix();
    const { q, conn, keys } = await queue(p, a.url, { horizonMs: 1 });
    await q.enqueue(event('evt_dl'));
    await vi.waitFor(async () => expect(await listDeadLetters(conn, keys)).toHaveLength(1), { timeout: 5000 });
    const [dead] = await listDeadLetters(conn, keys);
    expect(dead).toMatchObject({ id: 'evt_dl', type: 'test.event', attempts: 1, lastError: 'app answered 500' });
    expect(a.received).toHaveLength(1);

    // Stop the workers first so the replayed event stays where the replay put it.
    await q.stop();
    const [r1, r2] = await Promise.all([replayDeadLetters(conn, keys, { all: true }, Date.now()), replayDeadLetters(conn, keys, { ids: ['evt_dl'] }, Date.now())]);
    expect([...r1.replayed, ...r2.replayed]).toEqual(['evt_dl']);
    expect(Number(await fx.admin.sendCommand(['XLEN', `${p}queue:events`]))).toBe(1);
    expect(await listDeadLetters(conn, keys)).toEqual([]);
    expect(await replayDeadLetters(conn, keys, { ids: ['evt_dl', 'evt_other'] }, Date.now())).toEqual({ replayed: [], notFound: ['evt_dl', 'evt_other'] });
  });

  it('deduplicates in the same step as it stores: again, from another replica at once, or accepted before in passthrough', async () => {
    const a = await app();
    const p = prefix();
    const [one, two] = [await queue(p, a.url), await queue(p, a.url)];
    expect(await one.q.enqueue(event('evt_once'))).toBe('queued');
    expect(await one.q.enqueue(event('evt_once'))).toBe('duplicate');
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? one : two).q.enqueue(event('evt_race'))));
    expect(results.filter((r) => r === 'queued')).toHaveLength(1);
    await fx.admin.sendCommand(['SET', `${p}dedup:evt_passthrough`, 'accepted', 'PX', '60000']);
    expect(await two.q.enqueue(event('evt_passthrough'))).toBe('duplicate');
    expect(Number(await fx.admin.sendCommand(['PTTL', `${p}dedup:evt_once`]))).toBeGreaterThan(50_000);
    await vi.waitFor(() => expect(a.received.map((r) => r.headers['x-service-event-id']).sort()).toEqual(['evt_once', 'evt_race']), { timeout: 5000 });
  });

  it('list reads dead letters page by page: all of them, oldest first, across several pages', async () => {
    const a = await app();
    const p = prefix();
    const { conn, keys } = await queue(p, a.url);
    const n = DEAD_LETTER_PAGE * 2 + 7;
    for (let i = 0; i < n; i++) {
      const stored = { id: `evt_page_${i}`, type: 'test.event', headers: {}, body: Buffer.from('{}').toString('base64'), acceptedAt: 1, attempts: 3, deadAt: 2 };
      await fx.admin.sendCommand(['XADD', keys.dead, '*', 'e', JSON.stringify(stored)]);
    }
    const listed = await listDeadLetters(conn, keys);
    expect(listed.map((d) => d.id)).toEqual(Array.from({ length: n }, (_, i) => `evt_page_${i}`));
  });

  it('consumers of dead processes with nothing pending are removed from the group; those holding events are not', async () => {
    const a = await app();
    const p = prefix();
    const events = `${p}queue:events`;
    await fx.admin.sendCommand(['XGROUP', 'CREATE', events, 'workers', '0', 'MKSTREAM']);
    await fx.admin.sendCommand(['XGROUP', 'CREATECONSUMER', events, 'workers', 'ghost-idle']);
    // a ghost holding an event (read, never acknowledged): it must stay until the event is taken over
    await fx.admin.sendCommand(['XADD', events, '*', 'e', 'not-json']);
    await fx.admin.sendCommand(['XREADGROUP', 'GROUP', 'workers', 'ghost-holding', 'COUNT', '1', 'STREAMS', events, '>']);
    await new Promise((r) => setTimeout(r, 20));
    await queue(p, a.url, { staleConsumerMs: 10 });
    const names = async (): Promise<string[]> =>
      ((await fx.admin.sendCommand(['XINFO', 'CONSUMERS', events, 'workers'])) as unknown[][]).map((c) => String(c[1]));
    await vi.waitFor(async () => expect(await names()).not.toContain('ghost-idle'), { timeout: 5000 });
    expect(await names()).toContain('ghost-holding');
  });

  it('Redis unreachable: enqueue rejects with a RedisError (the ingress answers 503), nothing is claimed to be stored', async () => {
    const a = await app();
    const { q } = await queue(prefix(), a.url, { url: 'redis://127.0.0.1:1' });
    await expect(q.enqueue(event('evt_nowhere'))).rejects.toBeInstanceOf(RedisError);
  });
});
