import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { startSimulator, type SimulatorHandle } from '../../src/simulator/index.js';
import { getTestRedis, type TestRedis } from '../helpers/redis.js';
import { startTestSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { SECRET_A, startApp, type FakeApp } from '../helpers/webhooks.js';

/**
 * Two real sidecars (each its own Redis connection, timers and pools) on one Redis, reconciling the
 * same simulator every 100 ms with no grace: the lease lets one replica at a time run, and the
 * first-seen and handed times they share make each obligation reach the app once.
 */
const KEY = 'redec-key';
let redis: TestRedis;
let sim: SimulatorHandle | undefined;
let app: FakeApp | undefined;
const replicas: TestSidecar[] = [];

beforeAll(async () => {
  redis = await getTestRedis();
});
afterAll(async () => {
  await redis?.stop();
});
afterEach(async () => {
  await Promise.allSettled(replicas.splice(0).map((r) => r.close()));
  await sim?.close();
  await app?.close();
  sim = app = undefined;
});

const replicaFlags = (prefix: string, appUrl: string, extra: Record<string, string> = {}): Record<string, string> => ({
  'api-key': KEY,
  'redis-url': redis.url,
  'redis-key-prefix': prefix,
  'app-webhook-url': appUrl,
  'webhook-secret': SECRET_A,
  'webhook-listen': '127.0.0.1:0',
  'upstream-timeout-ms': '2000',
  'redec-reconcile-interval-ms': '100',
  'redec-reconcile-grace-ms': '0',
  'redec-reconcile-page-limit': '2',
  ...extra,
});

const runs = async (r: TestSidecar, outcome: string): Promise<number> => r.metric('consent_sidecar_redec_reconcile_runs_total', { outcome });

describe('REDEC reconciliation with several replicas on one Redis', { timeout: 240_000 }, () => {
  it('two replicas hand each obligation once, report the same gauge, and one that gets its evidence is not handed again', async () => {
    sim = await startSimulator({ apiKey: KEY });
    sim.revokeConsent({ userReference: 'alice', configKey: 'credit-report' });
    for (const u of ['bob', 'carol', 'dave', 'erin']) sim.grantConsent({ userReference: u, configKey: 'credit-report' });
    app = await startApp();
    const prefix = redis.prefix();
    replicas.push(await startTestSidecar(sim.url, replicaFlags(prefix, app.url)), await startTestSidecar(sim.url, replicaFlags(prefix, app.url)));
    const [a, b] = replicas as [TestSidecar, TestSidecar];

    await vi.waitFor(() => expect(app!.received.length).toBeGreaterThanOrEqual(5), { timeout: 20_000, interval: 20 });
    // Several more intervals, some replica's tick meeting the other's lease or its done hold.
    await vi.waitFor(
      async () => {
        expect((await runs(a, 'ok')) + (await runs(b, 'ok'))).toBeGreaterThanOrEqual(6);
        expect((await runs(a, 'skipped')) + (await runs(b, 'skipped'))).toBeGreaterThan(0);
      },
      { timeout: 60_000, interval: 50 }, // periodic runs on a busy machine: 20 s saw only two
    );
    const ids = app.received.map((r) => (JSON.parse(r.body.toString()) as { id: string }).id);
    expect(ids).toHaveLength(5);
    expect(new Set(ids).size).toBe(5);
    for (const r of replicas) expect(await r.metric('consent_sidecar_redec_pending_obligations')).toBe(5);
    expect((await a.metric('consent_sidecar_redec_handed_to_app_total', { outcome: 'accepted' })) + (await b.metric('consent_sidecar_redec_handed_to_app_total', { outcome: 'accepted' }))).toBe(5);

    // The tenant registers evidence for alice through a sidecar's passthrough: it leaves the listing.
    const alice = app.received.map((r) => JSON.parse(r.body.toString()) as { data: { customerTenantId: string; redecConsentId: string } }).find((e) => e.data.customerTenantId === 'alice')!;
    const ev = await a.send('POST', `/v1/redec/consents/${alice.data.redecConsentId}/notification-evidence`, { body: '{}' });
    expect(ev.status).toBe(200);
    await vi.waitFor(async () => {
      for (const r of replicas) expect(await r.metric('consent_sidecar_redec_pending_obligations')).toBe(4);
    }, { timeout: 20_000, interval: 50 });
    expect(app.received).toHaveLength(5);
  });

  it('first-seen lives in Redis: a replica restarted with a grace already running hands at once what another saw long ago', async () => {
    sim = await startSimulator({ apiKey: KEY });
    sim.grantConsent({ userReference: 'bob', configKey: 'credit-report' });
    app = await startApp();
    const prefix = redis.prefix();
    // First replica sees the obligation, grace one hour: nothing handed.
    const first = await startTestSidecar(sim.url, replicaFlags(prefix, app.url, { 'redec-reconcile-grace-ms': '3600000' }));
    replicas.push(first);
    await vi.waitFor(async () => expect(await runs(first, 'ok')).toBeGreaterThanOrEqual(1), { timeout: 20_000, interval: 20 });
    await first.close();
    expect(app.received).toHaveLength(0);
    // Its first-seen time is in Redis, not in the process.
    const { createClient } = await import('@redis/client');
    const admin = createClient({ url: redis.url });
    await admin.connect();
    const seen = await admin.hGetAll(`{${prefix}}redec:first-seen`);
    expect(Object.keys(seen)).toHaveLength(1);
    // Pretend it was first seen three hours ago (the clock a restart would otherwise reset).
    await admin.hSet(`{${prefix}}redec:first-seen`, Object.keys(seen)[0]!, String(Date.now() - 3 * 3_600_000));
    await admin.del(`{${prefix}}redec:lease`);
    await admin.close();
    const second = await startTestSidecar(sim.url, replicaFlags(prefix, app.url, { 'redec-reconcile-grace-ms': '3600000' }));
    replicas.push(second);
    await vi.waitFor(() => expect(app!.received).toHaveLength(1), { timeout: 20_000, interval: 20 });
    expect(await second.metric('consent_sidecar_redec_oldest_pending_age_seconds')).toBeGreaterThanOrEqual(3 * 3600);
  });

  it('Redis away: each run fails as redis and is counted; nothing is handed again and the process stays alive', async () => {
    sim = await startSimulator({ apiKey: KEY });
    sim.grantConsent({ userReference: 'bob', configKey: 'credit-report' });
    app = await startApp();
    const { spawnRedisServer } = await import('../helpers/redis.js');
    const own = await spawnRedisServer();
    const r = await startTestSidecar(sim.url, { ...replicaFlags(redis.prefix(), app.url), 'redis-url': own.url });
    replicas.push(r);
    await vi.waitFor(async () => expect(await runs(r, 'ok')).toBeGreaterThanOrEqual(1), { timeout: 20_000, interval: 20 });
    expect(app.received).toHaveLength(1);
    await own.stop();
    await vi.waitFor(async () => expect(await runs(r, 'redis')).toBeGreaterThanOrEqual(2), { timeout: 20_000, interval: 20 });
    expect(app.received).toHaveLength(1);
    expect((await r.admin('/healthz')).status).toBe(200);
  });
});
