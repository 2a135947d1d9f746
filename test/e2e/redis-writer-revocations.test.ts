import { createClient } from '@redis/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatorHandle } from '../../src/simulator/index.js';
import { adminOn, spawnRedisServer, type SpawnedRedis } from '../helpers/redis.js';
import { deliver, RecordingApp, replicaFlags, ServeProcess, signedEvent } from '../helpers/serve-process.js';

/**
 * A writer to the shared Redis (no webhook secret, no API key) must not keep a revoked ALLOW alive
 * on any replica after the revocation's 200. Two replicas as real `serve` processes: the service's
 * revocation reaches A (200), and B must stop serving its cached ALLOW. Before, 8 of 20 revocations
 * were lost on B when the newest stream entries were deleted as they were written, and every one
 * when B's reads failed for a moment around the deletion, or when the entry was rewritten in place.
 * A nudge B hears carries the revocation itself (sealed), so what the writer does to the log then
 * is nothing to B: here the writer also cuts B's subscription (ACL: no channels, which Redis
 * enforces by disconnecting it), so B depends on the log.
 */
describe('a Redis writer against the invalidation log', () => {
  let redis: SpawnedRedis;
  let sim: SimulatorHandle;
  const apps = [new RecordingApp(), new RecordingApp()];
  let a: ServeProcess;
  let b: ServeProcess;
  let writer: Awaited<ReturnType<typeof adminOn>>;
  const prefix = 'writer:';
  const stream = `{${prefix}}invalidations`;
  let seq = 0;
  /** The simulator's customers (its default fixture). */
  const USERS = ['alice', 'bob', 'carol', 'dave', 'erin'];

  beforeAll(async () => {
    redis = await spawnRedisServer();
    writer = await adminOn(redis.url);
    // B reaches Redis as a user of its own, whose permissions the writer changes (ACL SETUSER).
    await writer.sendCommand(['ACL', 'SETUSER', 'b', 'on', '>b-password', '~*', '&*', '+@all']);
    sim = await startSimulator({ apiKey: 'writer-key' });
    for (const app of apps) await app.up();
    const extra = { 'fleet-invalidation-max-silence-ms': '1500' };
    a = new ServeProcess(replicaFlags({ upstreamUrl: sim.url, apiKey: sim.apiKey, appUrl: apps[0]!.url, redisUrl: redis.url, prefix, extra }));
    b = new ServeProcess(replicaFlags({ upstreamUrl: sim.url, apiKey: sim.apiKey, appUrl: apps[1]!.url, redisUrl: `redis://b:b-password@127.0.0.1:${redis.port}`, prefix, extra }));
    await Promise.all([a.start(), b.start()]);
    // A log in use holds older entries (an empty one made every gap look like a trim, even before).
    for (let i = 0; i < 3; i++) await revokeThroughA(`someone-else-${i}`);
  }, 120_000);

  afterAll(async () => {
    await Promise.allSettled([a?.stop(), b?.stop(), ...apps.map((x) => x.down())]);
    writer?.destroy();
    await sim?.close();
    await redis?.stop();
  });

  /** An ALLOW for `user` cached on B (asked of the service, then served from the cache). */
  async function cachedOnB(user: string): Promise<void> {
    sim.grantConsent({ userReference: user, configKey: 'marketing-email', ttlMs: 3_600_000 });
    expect((await b.check(user, 'marketing-email')).json).toMatchObject({ decision: 'ALLOW' });
    expect(await b.check(user, 'marketing-email')).toMatchObject({ source: 'cache', json: { decision: 'ALLOW' } });
  }

  /** The service revokes and delivers the revocation to A, which answers 200. */
  async function revokeThroughA(user: string): Promise<void> {
    if (USERS.includes(user)) sim.revokeConsent({ userReference: user, configKey: 'marketing-email' });
    const event = signedEvent(`evt_revoke_${user}_${++seq}`, seq, 'consent_action.created', { action: 'revoke', userReference: user });
    expect(await deliver(a, event)).toStrictEqual({ status: 200, body: { status: 'accepted' } });
  }

  /** B stops serving the revoked ALLOW (asks the service, which denies), and never serves it again. */
  async function deniedOnB(user: string): Promise<void> {
    await expect.poll(async () => (await b.check(user, 'marketing-email')).json, { timeout: 10_000, interval: 20 }).toStrictEqual({ decision: 'DENY', configKey: 'marketing-email' });
    expect(await b.check(user, 'marketing-email')).toMatchObject({ source: 'upstream', json: { decision: 'DENY' } });
  }

  it("the revocation's entry rewritten in place before B reads it (the stream deleted and added back, same ids, its user changed): B purges, never serves the revoked ALLOW", async () => {
    await cachedOnB('dave');
    const before = await b.metric('consent_sidecar_cache_reconnect_purges_total', { cause: 'unauthenticated' });
    // B does not hear the nudge and cannot read until the entry is rewritten (a writer wins the
    // same race with a pipelined script): the counters agree as long as no entry was deleted
    // before (this test runs first), so only the entry's MAC can tell.
    await writer.sendCommand(['ACL', 'SETUSER', 'b', 'resetchannels', '-xinfo']);
    try {
      await revokeThroughA('dave');
      const rewrite = `
local all = redis.call('XRANGE', KEYS[1], '-', '+')
redis.call('DEL', KEYS[1])
for i, e in ipairs(all) do
  local f = e[2]
  if i == #all then for j = 1, #f, 2 do if f[j] == 'u' then f[j + 1] = 'nobody' end end end
  redis.call('XADD', KEYS[1], e[1], unpack(f))
end
return #all`;
      expect(await writer.sendCommand(['EVAL', rewrite, '1', stream])).toBeGreaterThan(1);
    } finally {
      await writer.sendCommand(['ACL', 'SETUSER', 'b', 'allchannels', '+xinfo']);
    }
    await deniedOnB('dave');
    expect((await b.metric('consent_sidecar_cache_reconnect_purges_total', { cause: 'unauthenticated' })) - before).toBe(1);
  }, 60_000);

  it("B's reads refused for a moment (ACL -xinfo) around one deletion: B purges when it reads again", async () => {
    await cachedOnB('erin');
    const refused = await b.metric('consent_sidecar_cache_invalidation_read_failures_total', { kind: 'refused' });
    await writer.sendCommand(['ACL', 'SETUSER', 'b', 'resetchannels', '-xinfo']);
    try {
      // B has found it cannot read (it reads when its subscription is cut, and each second after)
      await expect.poll(() => b.metric('consent_sidecar_cache_invalidation_read_failures_total', { kind: 'refused' }), { timeout: 10_000 }).toBeGreaterThan(refused);
      await revokeThroughA('erin');
      const [[newest]] = (await writer.sendCommand(['XREVRANGE', stream, '+', '-', 'COUNT', '1'])) as [[string]];
      expect(await writer.sendCommand(['XDEL', stream, newest])).toBe(1);
    } finally {
      await writer.sendCommand(['ACL', 'SETUSER', 'b', 'allchannels', '+xinfo']);
    }
    await deniedOnB('erin');
  }, 60_000);

  it("B's reads refused for longer than --fleet-invalidation-max-silence-ms while Redis answers: B serves nothing from its cache until it reads again", async () => {
    await cachedOnB('alice');
    await cachedOnB('bob');
    await writer.sendCommand(['ACL', 'SETUSER', 'b', 'resetchannels', '-xinfo']);
    try {
      await revokeThroughA('alice');
      const [[newest]] = (await writer.sendCommand(['XREVRANGE', stream, '+', '-', 'COUNT', '1'])) as [[string]];
      await writer.sendCommand(['XDEL', stream, newest]);
      await deniedOnB('alice');
      // not a purge: every check asks the service while the log cannot be read
      expect(await b.check('bob', 'marketing-email')).toMatchObject({ source: 'upstream', json: { decision: 'ALLOW' } });
      expect(await b.metric('consent_sidecar_cache_bypassed')).toBe(1);
      expect(await b.metric('consent_sidecar_redis_up')).toBe(1);
      expect(b.logs().some((l) => l.event === 'cache_bypassed')).toBe(true);
    } finally {
      await writer.sendCommand(['ACL', 'SETUSER', 'b', 'allchannels', '+xinfo']);
    }
    await expect.poll(() => b.metric('consent_sidecar_cache_bypassed'), { timeout: 10_000 }).toBe(0);
    expect(await b.check('alice', 'marketing-email')).toMatchObject({ json: { decision: 'DENY' } });
    await b.check('bob', 'marketing-email');
    expect(await b.check('bob', 'marketing-email')).toMatchObject({ source: 'cache', json: { decision: 'ALLOW' } });
  }, 60_000);

  it('Redis answering nobody (frozen) for longer than --fleet-invalidation-max-silence-ms: B keeps serving its cache (decisions are unaffected)', async () => {
    await cachedOnB('carol');
    const failuresBefore = await b.metric('consent_sidecar_cache_invalidation_read_failures_total', { kind: 'no_answer' });
    redis.freeze();
    try {
      await expect.poll(() => b.metric('consent_sidecar_cache_invalidation_read_failures_total', { kind: 'no_answer' }), { timeout: 20_000 }).toBeGreaterThan(failuresBefore + 3);
      expect(await b.check('carol', 'marketing-email')).toMatchObject({ source: 'cache', json: { decision: 'ALLOW' } });
      expect(await b.metric('consent_sidecar_cache_bypassed')).toBe(0);
    } finally {
      redis.thaw();
    }
  }, 60_000);
  it('the newest entries deleted as they are written (XDEL on each nudge): 20 revocations, none outlives its 200 on B', async () => {
    for (const r of [a, b]) await expect.poll(() => r.metric('consent_sidecar_redis_up'), { timeout: 20_000 }).toBe(1);
    const purgesBefore = await b.metric('consent_sidecar_cache_reconnect_purges_total', { cause: 'deleted' });
    const nudges = createClient({ url: redis.url });
    nudges.on('error', () => undefined);
    await nudges.connect();
    let deleted = 0;
    // Each nudge carries its entry: ["e1", id, …].
    await nudges.subscribe(`{${prefix}}invalidate`, (nudge) => void writer.sendCommand(['XDEL', stream, (JSON.parse(nudge) as string[])[1]!]).then((n) => (deleted += Number(n))));
    // The writer also keeps B from hearing the nudges (ACL: no channels; its subscription is cut),
    // so B reads only on its poll and every deletion comes first. (With the nudges B read first
    // some of the time: the attack session lost 8 of 20 revocations that way.)
    await writer.sendCommand(['ACL', 'SETUSER', 'b', 'resetchannels']);
    try {
      for (let i = 0; i < 20; i++) {
        const user = USERS[i % USERS.length]!;
        await cachedOnB(user);
        await revokeThroughA(user);
        await deniedOnB(user);
      }
    } finally {
      await writer.sendCommand(['ACL', 'SETUSER', 'b', 'allchannels']);
      await nudges.close();
    }
    expect(deleted).toBe(20);
    expect((await b.metric('consent_sidecar_cache_reconnect_purges_total', { cause: 'deleted' })) - purgesBefore).toBe(20);
  }, 180_000);
});
