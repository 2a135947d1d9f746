import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatorHandle } from '../../src/simulator/index.js';
import { runCli } from '../helpers/cli.js';
import { adminOn, spawnRedisServer, type SpawnedRedis } from '../helpers/redis.js';
import { deliveryHeaders } from '../helpers/webhooks.js';
import { deliver, RecordingApp, replicaFlags, SECRET, ServeProcess, signedEvent } from '../helpers/serve-process.js';

/**
 * A writer to the shared Redis (no webhook secret, no API key) against the webhook wing, with real
 * `serve` processes: it cannot make an old or delivered event reach the app again, cannot silence
 * an event with a marker or a claim of its own, and cannot crash a replica with an entry too large to read.
 * Before, each of these worked (a 30-day-old entry and a re-added one were forwarded, a plain
 * `accepted` made the genuine event a duplicate, a 60 MiB entry cost ~145 MiB to read).
 */
describe('a Redis writer against the webhook wing', () => {
  let redis: SpawnedRedis;
  let sim: SimulatorHandle;
  let writer: Awaited<ReturnType<typeof adminOn>>;
  const queueApps = [new RecordingApp(), new RecordingApp()];
  const passApp = new RecordingApp();
  let queue: ServeProcess[] = [];
  let pass: ServeProcess;
  const qp = 'writer-queue:';
  const pp = 'writer-pass:';
  const key = (prefix: string, ...parts: string[]): string => [`{${prefix}}${parts[0]}`, ...parts.slice(1)].join(':');
  const received = (id: string): number => queueApps.reduce((n, a) => n + a.count(id), 0);
  const forwards = async (outcome: string): Promise<number> => (await Promise.all(queue.map((r) => r.metric('consent_sidecar_webhook_queue_forwards_total', { outcome })))).reduce((a, b) => a + b, 0);
  const deadLetters = async (): Promise<{ id: string; lastError: string }[]> =>
    ((await writer.sendCommand(['XRANGE', key(qp, 'queue', 'dead'), '-', '+'])) as [string, string[]][]).map(([, f]) => JSON.parse(f[f.indexOf('e') + 1]!) as { id: string; lastError: string });

  /** What the ingress stores for `event` (any reader of Redis can keep such a copy). */
  function storedCopy(event: { body: string; headers: Record<string, string> }): string {
    const id = (JSON.parse(event.body) as { id: string }).id;
    const { 'x-service-timestamp': timestamp, 'x-service-signature': signature } = event.headers;
    return JSON.stringify({ v: 2, id, timestamp, signature, body: Buffer.from(event.body).toString('base64'), acceptedAt: Date.now(), attempts: 0 });
  }

  /** `event` as the service signed it at `timestampS`. */
  function signedAt(id: string, timestampS: number): { body: string; headers: Record<string, string> } {
    const body = JSON.stringify({ id, sequence: 1, type: 'test.event', occurredAt: timestampS * 1000, data: {} });
    return { body, headers: deliveryHeaders(SECRET, timestampS, body, id) };
  }

  beforeAll(async () => {
    redis = await spawnRedisServer();
    writer = await adminOn(redis.url);
    sim = await startSimulator({ apiKey: 'writer-hooks-key' });
    for (const app of [...queueApps, passApp]) await app.up();
    queue = queueApps.map((app) => new ServeProcess(replicaFlags({ upstreamUrl: sim.url, apiKey: sim.apiKey, appUrl: app.url, redisUrl: redis.url, prefix: qp, extra: { 'webhook-delivery': 'queue' } })));
    pass = new ServeProcess(replicaFlags({ upstreamUrl: sim.url, apiKey: sim.apiKey, appUrl: passApp.url, redisUrl: redis.url, prefix: pp }));
    await Promise.all([...queue, pass].map((r) => r.start()));
  }, 120_000);

  afterAll(async () => {
    await Promise.allSettled([...queue, pass].map((r) => r?.stop()));
    await Promise.allSettled([...queueApps, passApp].map((a) => a.down()));
    writer?.destroy();
    await sim?.close();
    await redis?.stop();
  });

  it("a queue entry signed 30 days ago, added with XADD: dead-lettered as expired, never forwarded, and an operator's replay --all leaves it there", async () => {
    for (const r of [...queue, pass]) await expect.poll(() => r.metric('consent_sidecar_redis_up'), { timeout: 20_000 }).toBe(1);
    const thirtyDaysAgo = Math.floor(Date.now() / 1000) - 30 * 86_400;
    await writer.sendCommand(['XADD', key(qp, 'queue', 'events'), '*', 'e', storedCopy(signedAt('evt_old', thirtyDaysAgo))]);
    await expect.poll(deadLetters, { timeout: 20_000 }).toContainEqual(expect.objectContaining({ id: 'evt_old', lastError: 'expired' }));
    await expect.poll(() => forwards('expired'), { timeout: 10_000 }).toBe(1);
    expect(received('evt_old')).toBe(0);
    // It may be a copy of an event the app had, kept until its delivered marker lapsed: no replay.
    const replay = await runCli(['webhook', 'dead-letters', 'replay', '--all', '--redis-url', redis.url, '--redis-key-prefix', qp, '--webhook-secret', SECRET]);
    expect(replay).toMatchObject({ code: 1, stdout: 'replayed 0\n' });
    expect(replay.stderr).toMatch(/left as dead letters, .*carry no replay mark.*: evt_old\n/);
    expect(await deadLetters()).toContainEqual(expect.objectContaining({ id: 'evt_old', lastError: 'expired' }));
    expect(await writer.xLen(key(qp, 'queue', 'events'))).toBe(0);
    expect(received('evt_old')).toBe(0);
  }, 60_000);

  it("an event's delivered marker deleted and its entry added again: not forwarded again, by either replica", async () => {
    const event = signedEvent('evt_again', 2);
    expect(await deliver(queue[0]!, event)).toStrictEqual({ status: 200, body: { status: 'queued' } });
    await expect.poll(() => received('evt_again'), { timeout: 20_000 }).toBe(1);
    const marker = key(qp, 'queue', 'delivered', 'evt_again');
    await expect.poll(() => writer.exists(marker), { timeout: 10_000 }).toBe(1);
    const dropped = await forwards('already_delivered');
    expect(await writer.del(marker)).toBe(1);
    // The same body and signature as the delivery the service made: a copy any reader of Redis can keep.
    const copy = storedCopy(event);
    for (let i = 0; i < 4; i++) await writer.sendCommand(['XADD', key(qp, 'queue', 'events'), '*', 'e', copy]);
    await expect.poll(() => forwards('already_delivered'), { timeout: 20_000 }).toBe(dropped + 4);
    expect(received('evt_again')).toBe(1);
  }, 60_000);

  it('a forged accepted marker (SET dedup:<id> accepted) does not stop the genuine event: it is delivered, and the forgery counted', async () => {
    await writer.sendCommand(['SET', key(pp, 'dedup', 'evt_silenced'), 'accepted', 'PX', '86400000']);
    await writer.sendCommand(['SET', key(pp, 'dedup', 'evt_silenced_too'), `accepted:${'0'.repeat(32)}`, 'PX', '86400000']);
    expect(await deliver(pass, signedEvent('evt_silenced', 3))).toStrictEqual({ status: 200, body: { status: 'accepted' } });
    expect(await deliver(pass, signedEvent('evt_silenced_too', 4))).toStrictEqual({ status: 200, body: { status: 'accepted' } });
    expect(passApp.count('evt_silenced')).toBe(1);
    expect(passApp.count('evt_silenced_too')).toBe(1);
    expect(await pass.metric('consent_sidecar_webhook_marker_mismatches_total', { marker: 'accepted' })).toBe(2);
    // and from now on, genuinely accepted, a duplicate
    expect(await deliver(pass, signedEvent('evt_silenced', 3))).toStrictEqual({ status: 200, body: { status: 'duplicate' } });
  }, 60_000);

  it('a forged in-flight claim with a 30-day TTL (SET dedup:<id> inflight:… PX 30 days) does not hold the genuine event: it is delivered at once, and the forgery counted', async () => {
    const before = await pass.metric('consent_sidecar_webhook_marker_mismatches_total', { marker: 'accepted' });
    await writer.sendCommand(['SET', key(pp, 'dedup', 'evt_held_30d'), 'inflight:forged', 'PX', String(30 * 86_400_000)]);
    expect(await deliver(pass, signedEvent('evt_held_30d', 6))).toStrictEqual({ status: 200, body: { status: 'accepted' } });
    expect(passApp.count('evt_held_30d')).toBe(1);
    expect(await pass.metric('consent_sidecar_webhook_marker_mismatches_total', { marker: 'accepted' })).toBe(before + 1);
    expect(await deliver(pass, signedEvent('evt_held_30d', 6))).toStrictEqual({ status: 200, body: { status: 'duplicate' } });
  }, 60_000);

  it('a dedup key of another type (HSET dedup:<id>) does not silence the event: queue mode answers 200 queued, not 503, and delivers it; passthrough accepts it without deciding alone; each forgery counted', async () => {
    const mismatches = async (): Promise<number> => (await Promise.all(queue.map((r) => r.metric('consent_sidecar_webhook_marker_mismatches_total', { marker: 'accepted' })))).reduce((a, b) => a + b, 0);
    const before = await mismatches();
    await writer.hSet(key(qp, 'dedup', 'evt_hashed'), 'x', 'y');
    const event = signedEvent('evt_hashed', 7);
    expect(await deliver(queue[0]!, event)).toStrictEqual({ status: 200, body: { status: 'queued' } });
    await expect.poll(() => received('evt_hashed'), { timeout: 20_000 }).toBe(1);
    expect(await mismatches()).toBe(before + 1);
    expect(await deliver(queue[1]!, event)).toStrictEqual({ status: 200, body: { status: 'duplicate' } });

    const passBefore = await pass.metric('consent_sidecar_webhook_marker_mismatches_total', { marker: 'accepted' });
    await writer.hSet(key(pp, 'dedup', 'evt_hashed_pass'), 'x', 'y');
    expect(await deliver(pass, signedEvent('evt_hashed_pass', 8))).toStrictEqual({ status: 200, body: { status: 'accepted' } });
    expect(passApp.count('evt_hashed_pass')).toBe(1);
    expect(await pass.metric('consent_sidecar_webhook_marker_mismatches_total', { marker: 'accepted' })).toBe(passBefore + 1);
    expect(await pass.metric('consent_sidecar_webhook_dedup_fallbacks_total', { op: 'claim' })).toBe(0);
  }, 60_000);

  it('40 copies of a queued event added while its first forward is open, read by both replicas: the app gets it once', async () => {
    // The apps answer late enough for the copies to be added while the first forward is open.
    for (const app of queueApps) app.delayMs = 1500;
    try {
      const event = signedEvent('evt_copied_40', 9);
      expect(await deliver(queue[0]!, event)).toStrictEqual({ status: 200, body: { status: 'queued' } });
      await expect.poll(() => received('evt_copied_40'), { timeout: 20_000 }).toBe(1);
      const copy = storedCopy(event);
      await Promise.all(Array.from({ length: 40 }, () => writer.sendCommand(['XADD', key(qp, 'queue', 'events'), '*', 'e', copy])));
      // Each copy waits for the open forward, then is dropped as delivered: the queue ends empty.
      const left = async (): Promise<number> => (await writer.xLen(key(qp, 'queue', 'events'))) + (await writer.zCard(key(qp, 'queue', 'delayed')));
      await expect.poll(left, { timeout: 40_000 }).toBe(0);
      expect(received('evt_copied_40')).toBe(1);
      expect(await forwards('in_flight')).toBeGreaterThanOrEqual(1);
    } finally {
      for (const app of queueApps) app.delayMs = 0;
    }
  }, 60_000);

  it('a 60 MiB entry in the queue stream: the replicas never read it (peak RSS under 200 MiB), it ends as a dead letter (oversized), and events flow on', async () => {
    const hwm = (r: ServeProcess): number => Number(/^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${r.pid}/status`, 'utf8'))![1]) * 1024;
    const before = queue.map(hwm);
    const big = Buffer.alloc(60 * 1024 * 1024, 'a').toString();
    await writer.sendCommand(['XADD', key(qp, 'queue', 'events'), '*', 'e', big, 'i', 'evt_huge']);
    await expect.poll(deadLetters, { timeout: 30_000 }).toContainEqual(expect.objectContaining({ id: 'evt_huge', lastError: 'oversized' }));
    // counted by the replica whose read dead-lettered it (unless that read's answer came too late:
    // the script copies the entry inside Redis, which takes a while on a busy machine)
    expect(await forwards('oversized')).toBeLessThanOrEqual(1);
    expect(await deliver(queue[1]!, signedEvent('evt_after_huge', 5))).toStrictEqual({ status: 200, body: { status: 'queued' } });
    await expect.poll(() => received('evt_after_huge'), { timeout: 20_000 }).toBe(1);
    for (const [i, r] of queue.entries()) {
      expect(r.running).toBe(true);
      const peak = hwm(r);
      expect(peak, `replica ${i}: peak RSS ${Math.round(peak / 2 ** 20)} MiB (${Math.round(before[i]! / 2 ** 20)} MiB before)`).toBeLessThan(200 * 2 ** 20);
    }
  }, 120_000);
});
