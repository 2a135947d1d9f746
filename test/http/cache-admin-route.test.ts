import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DecisionMetrics } from '../../src/decision/index.js';
import { cacheAdminRoute } from '../../src/http/cache-admin-route.js';
import type { Revocation, RevocationPublisher } from '../../src/lib/revocation-hook.js';
import { createRegistry, silentLogger } from '../../src/observability/index.js';
import { useTestRedis } from '../helpers/redis.js';
import { startTestSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { allow, startUpstream, type ReceivedRequest, type ScriptedUpstream } from '../helpers/upstream.js';
import { PATIENTLY } from '../helpers/wait.js';

// DELETE /sidecar/cache: a purge by hand goes through the fleet's fan-out (issue 21), so with
// Redis every replica sharing the key prefix purges, not only the one that was asked.

const KEY = 'cache-admin';
/** ALLOW for whatever was asked, valid an hour. */
const allowAsked = (r: ReceivedRequest) => ({ body: allow((JSON.parse(r.body) as { configKey: string }).configKey, Date.now() + 3_600_000) });

describe('DELETE /sidecar/cache, two sidecars on one real Redis', () => {
  const fx = useTestRedis();
  let upstream: ScriptedUpstream | undefined;
  let sidecars: TestSidecar[] = [];

  afterEach(async () => {
    await Promise.allSettled(sidecars.map((s) => s.close()));
    await upstream?.close();
    sidecars = [];
    upstream = undefined;
  });

  /**
   * Two replicas sharing the key prefix. The invalidation log's entries are MACed with a key derived
   * from the webhook secrets: replicas given one (the webhook ingress on, its app never called here)
   * share a purge as it was asked; replicas without one can authenticate no entry (`keyless`).
   */
  async function twoReplicas(o: { keyless?: boolean } = {}): Promise<[TestSidecar, TestSidecar]> {
    upstream = await startUpstream(allowAsked);
    const webhooks = { 'webhook-listen': '127.0.0.1:0', 'app-webhook-url': 'http://127.0.0.1:9/webhooks', 'webhook-secret': 'whsec_cache_admin_test_secret' };
    const flags = { 'redis-url': fx.redis.url, 'redis-key-prefix': fx.redis.prefix(), ...(o.keyless ? {} : webhooks) };
    sidecars = await Promise.all([startTestSidecar(upstream.url, flags), startTestSidecar(upstream.url, flags)]);
    return sidecars as [TestSidecar, TestSidecar];
  }

  /** Asks twice: the second answer must come from the cache. */
  async function cached(s: TestSidecar, userReference: string): Promise<void> {
    await s.check({ userReference, configKey: KEY });
    expect((await s.check({ userReference, configKey: KEY })).source).toBe('cache');
  }

  const received = (s: TestSidecar, scope: 'user' | 'all'): Promise<number> => s.metric('consent_sidecar_cache_invalidations_received_total', { scope });

  it('by user on one: the other forgets that user’s ALLOW (and keeps the others’)', async () => {
    const [a, b] = await twoReplicas();
    for (const s of [a, b]) for (const u of ['bob', 'carol']) await cached(s, u);
    const heard = await received(b, 'user');

    const purge = await a.send('DELETE', '/sidecar/cache?userReference=bob');
    expect(purge.status).toBe(200);
    expect(purge.json).toStrictEqual({ purged: 1 });
    // The condition: b has read the revocation a wrote to Redis.
    await vi.waitFor(async () => expect(await received(b, 'user')).toBeGreaterThan(heard), PATIENTLY);

    const checksBefore = upstream!.checks;
    expect((await b.check({ userReference: 'bob', configKey: KEY })).source).toBe('upstream');
    expect((await b.check({ userReference: 'carol', configKey: KEY })).source).toBe('cache');
    expect((await a.check({ userReference: 'bob', configKey: KEY })).source).toBe('upstream');
    expect(upstream!.checks).toBe(checksBefore + 2);
    expect(await a.metric('consent_sidecar_cache_purged_entries_total', { trigger: 'manual' })).toBe(1);
    expect(await b.metric('consent_sidecar_cache_purged_entries_total', { trigger: 'webhook' })).toBe(1);
  });

  it('everything on one: the other’s cache is empty too', async () => {
    const [a, b] = await twoReplicas();
    for (const s of [a, b]) for (const u of ['bob', 'carol']) await cached(s, u);
    const heard = await received(b, 'all');

    const purge = await b.send('DELETE', '/sidecar/cache');
    expect(purge.status).toBe(200);
    expect(purge.json).toStrictEqual({ purged: 2 });
    await vi.waitFor(async () => expect(await received(a, 'all')).toBeGreaterThan(heard), PATIENTLY);

    for (const s of [a, b]) for (const u of ['bob', 'carol']) expect((await s.check({ userReference: u, configKey: KEY })).source).toBe('upstream');
  });

  it('replicas without a webhook secret: a purge by user on one empties the other’s whole cache (an entry without a MAC revoked who knows what)', async () => {
    const [a, b] = await twoReplicas({ keyless: true });
    for (const s of [a, b]) for (const u of ['bob', 'carol']) await cached(s, u);
    const purges = (): Promise<number> => b.metric('consent_sidecar_cache_reconnect_purges_total', { cause: 'unauthenticated' });
    const before = await purges();

    expect((await a.send('DELETE', '/sidecar/cache?userReference=bob')).json).toStrictEqual({ purged: 1 });
    await vi.waitFor(async () => expect(await purges()).toBeGreaterThan(before), PATIENTLY);
    for (const u of ['bob', 'carol']) expect((await b.check({ userReference: u, configKey: KEY })).source).toBe('upstream');
    expect(await received(b, 'user')).toBe(0);
  });
});

describe('cacheAdminRoute', () => {
  let server: Server | undefined;
  afterEach(async () => {
    await new Promise((r) => server?.close(r) ?? r(undefined));
    server = undefined;
  });

  /** The route over a cache holding one entry of each user and three in all. */
  async function mount(publish: RevocationPublisher['publish']): Promise<{ url: string; manual: () => Promise<number>; published: Revocation[] }> {
    const cache = { revokeUser: () => 1, revokeAll: () => 3 };
    const registry = createRegistry();
    const metrics = new DecisionMetrics(registry, () => 0);
    const manual = async (): Promise<number> => (await registry.getSingleMetric('consent_sidecar_cache_purged_entries_total')!.get()).values.find((v) => v.labels.trigger === 'manual')?.value ?? 0;
    const published: Revocation[] = [];
    const app = express();
    app.delete('/sidecar/cache', cacheAdminRoute({ cache, metrics, logger: silentLogger(), revocations: { publish: (r) => (published.push(r), publish(r)) } }));
    server = createServer(app);
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/sidecar/cache`, manual, published };
  }

  it('purges here (counted manual) and publishes it: one user, or all', async () => {
    const { url, manual, published } = await mount(() => Promise.resolve());
    expect(await (await fetch(`${url}?userReference=erin`, { method: 'DELETE' })).json()).toStrictEqual({ purged: 1 });
    expect(await (await fetch(url, { method: 'DELETE' })).json()).toStrictEqual({ purged: 3 });
    expect(published).toStrictEqual([{ scope: 'user', userReference: 'erin' }, { scope: 'all' }]);
    expect(await manual()).toBe(4);
  });

  it('the others cannot be told: 503 revocation_not_shared, with what was purged here', async () => {
    const { url, manual, published } = await mount(() => Promise.reject(new Error('redis down')));
    const res = await fetch(`${url}?userReference=erin`, { method: 'DELETE' });
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ error: 'revocation_not_shared', purged: 1 });
    expect(published).toHaveLength(1);
    expect(await manual()).toBe(1);
  });

  it('a bad userReference is refused before anything is purged or published', async () => {
    const { url, manual, published } = await mount(() => Promise.resolve());
    const res = await fetch(`${url}?userReference=`, { method: 'DELETE' });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: 'invalid_request', field: 'userReference' });
    expect(published).toHaveLength(0);
    expect(await manual()).toBe(0);
  });
});
