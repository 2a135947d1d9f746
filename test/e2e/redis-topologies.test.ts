import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatorHandle } from '../../src/simulator/index.js';
import { slotOf, spawnRedisCluster, spawnSentinels, waitForClusterOk, type SpawnedCluster, type SpawnedSentinels } from '../helpers/redis.js';
import { deliver, RecordingApp, replicaFlags, ServeProcess, signedEvent } from '../helpers/serve-process.js';

/**
 * Redis as tenants run it (contract, Redis topologies), with real `serve` processes: a 3-master
 * Redis Cluster made with `redis-cli --cluster create`, and a Sentinel-managed primary and replica.
 * The failovers are real: a master SIGKILLed, its replica promoted by the cluster or the sentinels.
 */
let sim: SimulatorHandle;
const running: ServeProcess[] = [];
const apps: RecordingApp[] = [];

async function app(): Promise<RecordingApp> {
  const a = new RecordingApp();
  await a.up();
  apps.push(a);
  return a;
}

async function replica(appUrl: string, prefix: string, redis: Record<string, string>, extra: Record<string, string> = {}): Promise<ServeProcess> {
  const r = new ServeProcess(replicaFlags({ upstreamUrl: sim.url, apiKey: sim.apiKey, appUrl, redis, prefix, extra }));
  await r.start();
  running.push(r);
  return r;
}

beforeAll(async () => {
  sim = await startSimulator({ apiKey: 'topology-key' });
}, 30_000);

afterEach(async () => {
  await Promise.allSettled(running.splice(0).map((r) => r.stop()));
  await Promise.allSettled(apps.splice(0).map((a) => a.down()));
});

afterAll(async () => {
  await sim?.close();
});

/** Delivers `event` to `targets` at once until one of them says 200 (the service's retries). */
async function deliverUntilAccepted(targets: readonly ServeProcess[], event: { body: string; headers: Record<string, string> }): Promise<void> {
  await expect
    .poll(async () => (await Promise.all(targets.map((t) => deliver(t, event).catch(() => ({ status: 0, body: {} }))))).some((a) => a.status === 200), { timeout: 30_000, interval: 100 })
    .toBe(true);
}

describe('a Redis Cluster', () => {
  let cluster: SpawnedCluster;
  beforeAll(async () => {
    cluster = await spawnRedisCluster({ masters: 3, replicasPerMaster: 1 });
  }, 120_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  it('given as one server (--redis-url to one node): redis_up is 0, said once with the way out, not a silent fall-back', async () => {
    const target = await app();
    const r = await replica(target.url, 'one-node:', { 'redis-url': cluster.nodes[0]!.url });
    await expect.poll(() => r.logs().some((l) => l.event === 'redis_down' && /cluster/.test(String(l.reason))), { timeout: 10_000 }).toBe(true);
    expect(await r.metric('consent_sidecar_redis_up')).toBe(0);
  }, 60_000);

  it('five replicas share one dedup and one invalidation log: 100 events each to three replicas reach one app once; a revocation reaches every replica', async () => {
    const prefix = 'five:';
    const seeds = { 'redis-cluster-nodes': cluster.seeds };
    const targets = await Promise.all(Array.from({ length: 5 }, () => app()));
    const rs: ServeProcess[] = [];
    for (const t of targets) rs.push(await replica(t.url, prefix, seeds));
    for (const r of rs) await expect.poll(() => r.metric('consent_sidecar_redis_up'), { timeout: 15_000 }).toBe(1);

    const ids: string[] = [];
    for (let i = 0; i < 100; i++) {
      const event = signedEvent(`evt_c${i}`, i + 1);
      ids.push(`evt_c${i}`);
      const three = [rs[i % 5]!, rs[(i + 1) % 5]!, rs[(i + 2) % 5]!];
      const answers = await Promise.all(three.map((r) => deliver(r, event)));
      for (const a of answers) expect(a.status, JSON.stringify(a.body)).toBe(200);
    }
    for (const id of ids) expect(targets.reduce((n, t) => n + t.accepted(id), 0), id).toBe(1);

    const erin = { userReference: 'erin', configKey: 'marketing-email' };
    sim.grantConsent({ ...erin, ttlMs: 3_600_000 });
    for (const r of rs) {
      await r.check(erin.userReference, erin.configKey);
      expect((await r.check(erin.userReference, erin.configKey)).source).toBe('cache');
    }
    sim.revokeConsent(erin);
    const revoke = signedEvent('evt_c_revoke', 1000, 'consent_action.created', { action: 'revoke', userReference: erin.userReference });
    expect((await deliver(rs[0]!, revoke)).status).toBe(200);
    for (const r of rs) await expect.poll(async () => (await r.check(erin.userReference, erin.configKey)).json.decision, { timeout: 5000, interval: 50 }).toBe('DENY');
  }, 180_000);

  it('queue mode with --redis-wait-replicas 1: the master of the slot killed mid-run, its replica promoted; every acknowledged event reaches the app', async () => {
    const prefix = 'qcluster:';
    const target = await app();
    const extra = { 'webhook-delivery': 'queue', 'redis-wait-replicas': '1', 'redis-command-timeout-ms': '1000' };
    const rs = [await replica(target.url, prefix, { 'redis-cluster-nodes': cluster.seeds }, extra), await replica(target.url, prefix, { 'redis-cluster-nodes': cluster.seeds }, extra)];
    for (const r of rs) await expect.poll(() => r.metric('consent_sidecar_redis_up'), { timeout: 15_000 }).toBe(1);

    const master = await cluster.masterOf(slotOf(`{${prefix}}queue:events`));
    const acknowledged: string[] = [];
    const refused: string[] = [];
    let i = 0;
    const send = async (): Promise<void> => {
      const id = `evt_q${i}`;
      const a = await deliver(rs[i % 2]!, signedEvent(id, ++i)).catch(() => ({ status: 0, body: {} }));
      (a.status === 200 ? acknowledged : refused).push(id);
    };
    while (acknowledged.length < 30) await send();
    await master.kill();
    // Deliveries go on through the failover: refused ones (503) are the service's to retry;
    // acknowledged ones must arrive. Once its replica is promoted, the old master comes back (as a
    // pod would) and joins as the new master's replica, so WAIT 1 can be met again.
    await expect
      .poll(
        async () => {
          await send();
          return cluster.masterOf(slotOf(`{${prefix}}queue:events`)).then((m) => m !== master, () => false);
        },
        { timeout: 60_000, interval: 0 },
      )
      .toBe(true);
    await master.start();
    const before = acknowledged.length;
    await expect
      .poll(
        async () => {
          await send();
          return acknowledged.length;
        },
        { timeout: 60_000, interval: 0 },
      )
      .toBeGreaterThanOrEqual(before + 30);
    await waitForClusterOk(cluster.nodes);
    await expect.poll(() => acknowledged.filter((id) => target.accepted(id) === 0).length, { timeout: 30_000 }).toBe(0);
    expect(refused.length).toBeGreaterThan(0); // the failover was seen: some deliveries were refused, not acknowledged
  }, 240_000);
});

describe('Redis with Sentinel', () => {
  let s: SpawnedSentinels;
  beforeAll(async () => {
    // Two replicas: with --redis-wait-replicas 1, the promoted one still has a replica to acknowledge writes.
    s = await spawnSentinels({ sentinels: 3, replicas: 2 });
  }, 120_000);
  afterAll(async () => {
    await s?.stop();
  });

  it('the primary killed mid-run: dedup and the queue go on against the new primary, nothing acknowledged lost with --redis-wait-replicas 1', async () => {
    const sentinels = { 'redis-sentinels': s.addresses, 'redis-sentinel-master': s.masterName };
    const queued = await app();
    const passthrough = await app();
    const extra = { 'redis-wait-replicas': '1', 'redis-command-timeout-ms': '1000' };
    const q = await replica(queued.url, 'sq:', sentinels, { ...extra, 'webhook-delivery': 'queue' });
    const p = [await replica(passthrough.url, 'sp:', sentinels, extra), await replica(passthrough.url, 'sp:', sentinels, extra)];
    for (const r of [q, ...p]) await expect.poll(() => r.metric('consent_sidecar_redis_up'), { timeout: 15_000 }).toBe(1);

    const acknowledged: string[] = [];
    for (let i = 0; i < 20; i++) {
      const e = signedEvent(`evt_sq${i}`, i + 1);
      if ((await deliver(q, e)).status === 200) acknowledged.push(`evt_sq${i}`);
    }
    const oldPort = await s.currentMasterPort();
    await s.primary.kill();
    await expect.poll(() => s.currentMasterPort().catch(() => oldPort), { timeout: 30_000, interval: 200 }).not.toBe(oldPort);

    // Both paths work again after the promotion: 0.7-2.7 s when this test runs alone here (three
    // runs). The bound was 10 s; inside the whole suite on two busy cores it was once missed (the
    // queue's WAIT 1 needs the other replica re-attached to the new primary), so it is a patience
    // bound now, not the measure. The service retries a 503; nothing acknowledged may be lost (below).
    const after = signedEvent('evt_sq_after', 100);
    await expect.poll(async () => (await deliver(q, after)).status, { timeout: 30_000, interval: 100 }).toBe(200);
    acknowledged.push('evt_sq_after');
    const dup = signedEvent('evt_sp_after', 101);
    await deliverUntilAccepted(p, dup);
    expect((await deliver(p[1]!, dup)).body.status).toBe('duplicate');
    // One forward; unless a replica decided alone (Redis silent past the lease, which a failover on
    // a busy machine can take: the documented fallback, counted), when each replica's copy may
    // reach the app (docs/fleet.md). A duplicate with no fallback counted still fails here.
    const fellBack = (await Promise.all(p.map((r) => r.metric('consent_sidecar_webhook_dedup_fallbacks_total')))).reduce((x, y) => x + y, 0);
    if (fellBack === 0) expect(passthrough.accepted('evt_sp_after')).toBe(1);
    else expect(passthrough.accepted('evt_sp_after')).toBeLessThanOrEqual(p.length);

    await expect.poll(() => acknowledged.filter((id) => queued.accepted(id) === 0).length, { timeout: 30_000 }).toBe(0);
  }, 180_000);
});
