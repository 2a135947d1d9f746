import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatorHandle } from '../../src/simulator/index.js';
import { spawnRedisServer, type SpawnedRedis } from '../helpers/redis.js';
import { deliver, RecordingApp, replicaFlags, ServeProcess, signedEvent } from '../helpers/serve-process.js';

/**
 * Redis slow is not Redis down (contract, Several replicas), with real `serve` processes and a
 * real redis-server frozen with SIGSTOP, as a fork, a slow disk or a noisy neighbour freezes it.
 * Before: every event delivered to two replicas during a 0.9 s freeze reached the apps twice (both
 * claims timed out and fell back to a local claim), and the thaw purged every replica's cache.
 */
let redis: SpawnedRedis;
let sim: SimulatorHandle;
const replicas: ServeProcess[] = [];
const apps: RecordingApp[] = [];

beforeAll(async () => {
  redis = await spawnRedisServer();
  sim = await startSimulator({ apiKey: 'stall-key' });
  for (let i = 0; i < 2; i++) {
    const app = new RecordingApp();
    await app.up();
    apps.push(app);
    const r = new ServeProcess(replicaFlags({ upstreamUrl: sim.url, apiKey: sim.apiKey, appUrl: app.url, redisUrl: redis.url, prefix: 'stall:' }));
    await r.start();
    replicas.push(r);
  }
}, 60_000);

afterAll(async () => {
  await Promise.allSettled(replicas.map((r) => r.stop()));
  await Promise.allSettled(apps.map((a) => a.down()));
  await sim?.close();
  await redis?.stop();
});

describe('Redis frozen while every event is delivered to two replicas at once', () => {
  it('every event reaches an app exactly once (copies in the stall get 503 and come again), and no replica loses its cache', async () => {
    const [r0, r1] = replicas as [ServeProcess, ServeProcess];
    for (const r of replicas) await expect.poll(() => r.metric('consent_sidecar_redis_up'), { timeout: 10_000 }).toBe(1);
    const alice = { userReference: 'alice', configKey: 'marketing-email' };
    sim.grantConsent({ ...alice, ttlMs: 3_600_000 });
    for (const r of replicas) {
      expect((await r.check(alice.userReference, alice.configKey)).source).toBe('upstream');
      expect((await r.check(alice.userReference, alice.configKey)).source).toBe('cache');
    }

    const events = Array.from({ length: 12 }, (_, i) => signedEvent(`evt_stall_${i}`, i + 1));
    const ids = events.map((e) => JSON.parse(e.body) as { id: string }).map((e) => e.id);
    redis.freeze();
    let answers: { status: number; body: Record<string, unknown> }[];
    try {
      // Each event to both replicas at once, as the service's retries can land; every claim waits on the frozen Redis.
      answers = await Promise.all(events.flatMap((e) => [deliver(r0, e), deliver(r1, e)]));
      // Decisions never wait on Redis: a cached ALLOW is served while it is frozen.
      expect((await r0.check(alice.userReference, alice.configKey)).source).toBe('cache');
    } finally {
      redis.thaw();
    }
    // Nothing was forwarded on a guess: every copy was refused, none accepted twice.
    for (const a of answers) expect([200, 503]).toContain(a.status);

    // The service retries what was refused, to both replicas again, until each event is accepted.
    for (const r of replicas) await expect.poll(() => r.metric('consent_sidecar_redis_up'), { timeout: 10_000 }).toBe(1);
    for (const e of events) {
      await expect
        .poll(async () => (await Promise.all([deliver(r0, e), deliver(r1, e)])).some((a) => a.status === 200 && (a.body.status === 'accepted' || a.body.status === 'duplicate')), {
          timeout: 30_000,
          interval: 200,
        })
        .toBe(true);
    }
    const arrivals = (id: string): number => apps.reduce((n, a) => n + a.accepted(id), 0);
    for (const id of ids) expect(arrivals(id), id).toBe(1);
    expect((await r0.metric('consent_sidecar_webhook_dedup_unknown_outcomes_total')) + (await r1.metric('consent_sidecar_webhook_dedup_unknown_outcomes_total'))).toBeGreaterThan(0);
    expect(await r0.metric('consent_sidecar_webhook_dedup_fallbacks_total')).toBe(0);
    expect(await r1.metric('consent_sidecar_webhook_dedup_fallbacks_total')).toBe(0);

    // Every replica's cache survived: no refetch of the cached ALLOW, no purge.
    for (const r of replicas) {
      expect((await r.check(alice.userReference, alice.configKey)).source).toBe('cache');
      expect(await r.metric('consent_sidecar_cache_reconnect_purges_total')).toBe(0);
    }
  }, 120_000);
});
