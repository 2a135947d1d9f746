import { createClient } from '@redis/client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatorHandle } from '../../src/simulator/index.js';
import { spawnRedisServer, type SpawnedRedis } from '../helpers/redis.js';
import { deliver, RecordingApp, replicaFlags, SECRET, ServeProcess, signedEvent } from '../helpers/serve-process.js';
import { runCli } from '../helpers/cli.js';

/**
 * The contract's queue mode (`--webhook-delivery queue`, issue 10) with real `serve` processes, a
 * real redis-server of the file's own (one scenario restarts it empty) and real apps; the service's
 * deliveries are signed here, independently of our code.
 */

const cli = (args: string[]) => runCli(args, {}, 'dist');

let redis: SpawnedRedis;
let sim: SimulatorHandle;
let n = 0;
const running: ServeProcess[] = [];
const apps: RecordingApp[] = [];

async function app(): Promise<RecordingApp> {
  const a = new RecordingApp();
  await a.up();
  apps.push(a);
  return a;
}

async function replica(appUrl: string, prefix: string, extra: Record<string, string> = {}): Promise<ServeProcess> {
  const r = new ServeProcess(
    replicaFlags({ upstreamUrl: sim.url, apiKey: sim.apiKey, appUrl, redisUrl: redis.url, prefix, extra: { 'webhook-delivery': 'queue', ...extra } }),
  );
  await r.start();
  running.push(r);
  return r;
}

const freshPrefix = (): string => `queue-${++n}:`;

beforeAll(async () => {
  redis = await spawnRedisServer();
  sim = await startSimulator({ apiKey: 'queue-key' });
}, 60_000);

afterEach(async () => {
  await Promise.allSettled(running.splice(0).map((r) => r.stop()));
  await Promise.allSettled(apps.splice(0).map((a) => a.down()));
});

afterAll(async () => {
  await sim?.close();
  await redis?.stop();
});

describe('queue mode', () => {
  it('without Redis, serve exits 2 naming --redis-url', async () => {
    const r = await cli(['serve', '--upstream-url', 'http://127.0.0.1:1', '--api-key', 'k', '--app-webhook-url', 'http://127.0.0.1:2/h', '--webhook-secret', 'whsec_x', '--webhook-delivery', 'queue']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--redis-url: is required with --webhook-delivery queue/);
  });

  it('app down: every delivery is answered 200 at once; app back: each event arrives once, within its backoff, with the passthrough headers', async () => {
    const target = await app();
    await target.down();
    const r = await replica(target.url, freshPrefix());
    const ids = Array.from({ length: 5 }, (_, i) => `evt_down_${i}`);
    // answered 200 with the app not even there: the answer does not wait on a forward (passthrough
    // would answer 503). No bound on how long the answers took: that is the machine's load.
    for (const [i, id] of ids.entries()) expect(await deliver(r, signedEvent(id, i + 1))).toStrictEqual({ status: 200, body: { status: 'queued' } });
    await expect.poll(() => r.metric('consent_sidecar_webhook_queue_forwards_total', { outcome: 'retry_scheduled' }), { timeout: 10_000, interval: 100 }).toBeGreaterThanOrEqual(10);
    expect(await r.metric('consent_sidecar_webhook_queue_depth')).toBe(5);
    expect(await r.metric('consent_sidecar_webhook_queue_oldest_age_seconds')).toBeGreaterThan(0);

    await target.up(target.port);
    // Each arrives within its backoff (2 s + 20 % jitter at this point; backoffMs is unit-tested in
    // test/redis/webhook-queue.test.ts): the poll's patience is the bound, not a timed assertion.
    await expect.poll(() => ids.every((id) => target.count(id) === 1), { timeout: 20_000, interval: 100 }).toBe(true);
    const first = target.received[0]!;
    expect(first.headers).toMatchObject({ 'x-consent-sidecar-verified': 'v1', 'x-service-event-id': first.id, 'content-type': 'application/json' });
    expect(first.headers?.['x-service-signature']).toMatch(/^v1=[0-9a-f]{64}$/);
    // Nothing waiting or being forwarded: a second copy would have to come from the stream, and it is empty.
    await expect.poll(() => r.metric('consent_sidecar_webhook_queue_depth'), { timeout: 15_000 }).toBe(0);
    for (const id of ids) expect(target.count(id)).toBe(1);
  }, 60_000);

  it('the same event twice, and to two replicas: one arrival; a redelivery after the app took it is dropped', async () => {
    const [a0, a1] = [await app(), await app()];
    const prefix = freshPrefix();
    const [r0, r1] = [await replica(a0.url, prefix), await replica(a1.url, prefix)];
    const event = signedEvent('evt_twice', 1);
    expect(await deliver(r0, event)).toStrictEqual({ status: 200, body: { status: 'queued' } });
    expect(await deliver(r0, event)).toStrictEqual({ status: 200, body: { status: 'duplicate' } });
    expect(await deliver(r1, event)).toStrictEqual({ status: 200, body: { status: 'duplicate' } });
    await expect.poll(() => a0.count('evt_twice') + a1.count('evt_twice'), { timeout: 15_000 }).toBe(1);

    // A crash after the app's 2xx and before the acknowledgement leaves the entry to be taken
    // again: put such a copy back in the stream, as Redis would hold it (the delivery as received).
    const c = createClient({ url: redis.url });
    await c.connect();
    try {
      const stored = {
        v: 2,
        id: 'evt_twice',
        timestamp: event.headers['x-service-timestamp'],
        signature: event.headers['x-service-signature'],
        body: Buffer.from(event.body).toString('base64'),
        acceptedAt: Date.now(),
        attempts: 0,
      };
      await c.sendCommand(['XADD', `{${prefix}}queue:events`, '*', 'e', JSON.stringify(stored)]);
    } finally {
      c.destroy();
    }
    await expect
      .poll(async () => (await r0.metric('consent_sidecar_webhook_queue_forwards_total', { outcome: 'already_delivered' })) + (await r1.metric('consent_sidecar_webhook_queue_forwards_total', { outcome: 'already_delivered' })), { timeout: 15_000 })
      .toBe(1);
    expect(a0.count('evt_twice') + a1.count('evt_twice')).toBe(1);
  }, 60_000);

  it('horizon short, app failing: the event is a dead letter, listed; replay delivers it once', async () => {
    const target = await app();
    target.status = 500;
    const prefix = freshPrefix();
    const r = await replica(target.url, prefix, { 'webhook-queue-horizon-ms': '2500' });
    expect(await deliver(r, signedEvent('evt_dead', 1, 'consent_action.created', { action: 'grant' }))).toStrictEqual({ status: 200, body: { status: 'queued' } });
    await expect.poll(() => r.metric('consent_sidecar_webhook_dead_letters'), { timeout: 15_000, interval: 200 }).toBe(1);
    const tries = target.count('evt_dead');
    expect(tries).toBeGreaterThanOrEqual(2);
    expect(await r.metric('consent_sidecar_webhook_queue_depth')).toBe(0);

    const where = ['--redis-url', redis.url, '--redis-key-prefix', prefix];
    // replay verifies each dead letter again: it needs serve's webhook secrets
    const secrets = ['--webhook-secret', SECRET];
    const json = await cli(['webhook', 'dead-letters', 'list', '--output', 'json', ...where]);
    expect(json.code, json.stderr).toBe(0);
    const rows = json.stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ id: 'evt_dead', type: 'consent_action.created', attempts: tries, lastError: 'app answered 500' });
    expect(rows[0]!.ageS).toBeGreaterThanOrEqual(2);
    const table = await cli(['webhook', 'dead-letters', 'list', ...where]);
    expect(table.stdout.split('\n')[0]).toMatch(/^ID\s+TYPE\s+ATTEMPTS\s+LAST ERROR\s+AGE$/);
    expect(table.stdout).toMatch(/evt_dead\s+consent_action\.created\s+\d+\s+app answered 500\s+\d+s/);

    // usage errors name the flag; an unknown id is said, exit 1
    expect((await cli(['webhook', 'dead-letters', 'replay', ...where])).stderr).toMatch(/--id: give the event ids/);
    const unknown = await cli(['webhook', 'dead-letters', 'replay', '--id', 'evt_nope', ...where, ...secrets]);
    expect(unknown).toMatchObject({ code: 1 });
    expect(unknown.stderr).toMatch(/not dead letters: evt_nope/);

    target.status = 200;
    const replay = await cli(['webhook', 'dead-letters', 'replay', '--id', 'evt_dead', ...where, ...secrets]);
    expect(replay.code, replay.stderr).toBe(0);
    expect(replay.stdout).toBe('replayed 1: evt_dead\n');
    await expect.poll(() => target.accepted('evt_dead'), { timeout: 15_000 }).toBe(1);
    await expect.poll(() => r.metric('consent_sidecar_webhook_dead_letters'), { timeout: 15_000 }).toBe(0);
    expect((await cli(['webhook', 'dead-letters', 'list', ...where])).stdout).toBe('no dead letters\n');
    // Nothing waiting or being forwarded: a second copy would have to come from the stream, and it is empty.
    await expect.poll(() => r.metric('consent_sidecar_webhook_queue_depth'), { timeout: 15_000 }).toBe(0);
    expect(target.accepted('evt_dead')).toBe(1);
  }, 180_000); // six CLI runs and a 2.5 s horizon: 54 s under stress-ng on two busy cores

  it('a replica killed while forwarding: another takes the event over once it is idle past the visibility timeout', async () => {
    const slow = await app();
    slow.delayMs = 30_000;
    const fine = await app();
    const prefix = freshPrefix();
    const extra = { 'webhook-forward-timeout-ms': '1000', 'webhook-dedup-lease-ms': '2500' };
    const a = await replica(slow.url, prefix, extra);
    expect(await deliver(a, signedEvent('evt_orphan', 1))).toStrictEqual({ status: 200, body: { status: 'queued' } });
    await expect.poll(() => slow.count('evt_orphan'), { timeout: 15_000, interval: 20 }).toBe(1);
    const takenAt = slow.received[0]!.at;
    await a.kill();
    await replica(fine.url, prefix, extra);
    await expect.poll(() => fine.count('evt_orphan'), { timeout: 10_000, interval: 50 }).toBe(1);
    // never before the visibility timeout: a slow app must not get a second copy meanwhile
    expect(fine.received[0]!.at - takenAt).toBeGreaterThanOrEqual(2500 - 250);
  }, 60_000);

  it('Redis restarted empty: 503 while it is away, then new events flow within seconds', async () => {
    const target = await app();
    const r = await replica(target.url, freshPrefix());
    expect(await deliver(r, signedEvent('evt_before', 1))).toStrictEqual({ status: 200, body: { status: 'queued' } });
    await expect.poll(() => target.count('evt_before'), { timeout: 15_000 }).toBe(1);

    await redis.stop();
    await expect.poll(() => r.metric('consent_sidecar_redis_up'), { timeout: 15_000 }).toBe(0);
    expect(await deliver(r, signedEvent('evt_away', 2))).toStrictEqual({ status: 503, body: { error: 'queue_unavailable' } });
    await redis.start();

    // "within seconds": the polls' patience is the bound, not a timed assertion.
    await expect.poll(async () => (await deliver(r, signedEvent('evt_after', 3))).status, { timeout: 10_000, interval: 200 }).toBe(200);
    await expect.poll(() => target.count('evt_after'), { timeout: 10_000, interval: 50 }).toBe(1);
  }, 60_000);

  it('the stream and its group deleted under running workers (NOGROUP): the group is recreated and events flow', async () => {
    const target = await app();
    const prefix = freshPrefix();
    const r = await replica(target.url, prefix);
    expect(await deliver(r, signedEvent('evt_g1', 1))).toStrictEqual({ status: 200, body: { status: 'queued' } });
    await expect.poll(() => target.count('evt_g1'), { timeout: 15_000 }).toBe(1);
    const c = createClient({ url: redis.url });
    await c.connect();
    try {
      await c.sendCommand(['DEL', `{${prefix}}queue:events`]);
    } finally {
      c.destroy();
    }
    expect(await deliver(r, signedEvent('evt_g2', 2))).toStrictEqual({ status: 200, body: { status: 'queued' } });
    await expect.poll(() => target.count('evt_g2'), { timeout: 15_000 }).toBe(1);
    expect(r.logs().some((l) => l.event === 'webhook_queue_group_lost')).toBe(true);
  }, 60_000);
});
