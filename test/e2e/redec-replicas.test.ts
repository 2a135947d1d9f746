import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { startSimulator, type SimulatorHandle } from '../../src/simulator/index.js';
import { getTestRedis, type TestRedis } from '../helpers/redis.js';
import { RecordingApp, replicaFlags, ServeProcess } from '../helpers/serve-process.js';

/**
 * What a pod runs: two real `node dist/cli.js serve` processes, each in front of its own app, on one
 * Redis, with the reconciler every 200 ms and no grace. Every obligation reaches exactly one app,
 * once, whichever replica held the lease.
 */
let redis: TestRedis;
let sim: SimulatorHandle | undefined;
let replicas: ServeProcess[] = [];
let apps: RecordingApp[] = [];

beforeAll(async () => {
  redis = await getTestRedis();
});
afterAll(async () => {
  await redis?.stop();
});
afterEach(async () => {
  await Promise.allSettled(replicas.map((r) => r.stop()));
  await Promise.allSettled(apps.map((a) => a.down()));
  await sim?.close();
  replicas = [];
  apps = [];
  sim = undefined;
});

describe('REDEC reconciliation: two serve processes on one Redis', { timeout: 90_000 }, () => {
  it('hand each pending obligation to one app, once, and both report the listing in their gauge', async () => {
    sim = await startSimulator({ apiKey: 'redec-e2e' });
    sim.revokeConsent({ userReference: 'alice', configKey: 'credit-report' });
    for (const u of ['bob', 'carol', 'dave', 'erin']) sim.grantConsent({ userReference: u, configKey: 'credit-report' });
    const prefix = redis.prefix();
    apps = [new RecordingApp(), new RecordingApp()];
    for (const a of apps) await a.up();
    const extra = { 'redec-reconcile-interval-ms': '200', 'redec-reconcile-grace-ms': '0', 'redec-reconcile-page-limit': '2' };
    replicas = apps.map((app) => new ServeProcess(replicaFlags({ upstreamUrl: sim!.url, apiKey: 'redec-e2e', appUrl: app.url, redisUrl: redis.url, prefix, extra })));
    await Promise.all(replicas.map((r) => r.start()));
    const ok = async (): Promise<number> => (await Promise.all(replicas.map((r) => r.metric('consent_sidecar_redec_reconcile_runs_total', { outcome: 'ok' })))).reduce((x, y) => x + y, 0);
    const received = (): string[] => apps.flatMap((a) => a.received.map((r) => r.id));
    await vi.waitFor(() => expect(received().length).toBeGreaterThanOrEqual(5), { timeout: 20_000, interval: 50 });
    await vi.waitFor(async () => expect(await ok()).toBeGreaterThanOrEqual(8), { timeout: 20_000, interval: 100 });
    expect(received()).toHaveLength(5);
    expect(new Set(received()).size).toBe(5);
    expect(received().every((id) => id.startsWith('reconcile_'))).toBe(true);
    for (const r of replicas) expect(await r.metric('consent_sidecar_redec_pending_obligations')).toBe(5);
  });
});
