import { request } from 'node:http';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startTestSidecar, type TestSidecar } from '../../helpers/sidecar.js';
import { allow, deny, startUpstream, type ReceivedRequest, type Reply, type ScriptedUpstream } from '../../helpers/upstream.js';
import { PATIENTLY } from '../../helpers/wait.js';

// Coalescing of concurrent misses, purges (by hand and by revocation) racing an upstream call,
// Cache-Control: no-cache, and DELETE /sidecar/cache.

const KEY = 'flow-coalesce';

let upstream: ScriptedUpstream | undefined;
let sidecar: TestSidecar | undefined;

afterEach(async () => {
  await sidecar?.close();
  await upstream?.close();
  sidecar = undefined;
  upstream = undefined;
});

/** ALLOW for whatever the request asked, valid a minute. */
const allowAsked =
  (extra: Partial<Reply> = {}) =>
  (r: ReceivedRequest): Reply => {
    const { configKey } = JSON.parse(r.body) as { configKey: string };
    return { body: allow(configKey, Date.now() + 60_000), ...extra };
  };

/**
 * The service holds every answer until the test releases it: "concurrent" and "in flight" are then
 * facts, not a bet that the other requests arrive within a delay (150-300 ms lost that bet on a busy
 * machine: a late request found the flight over and made a second call).
 */
function gate(): { held: Promise<void>; release: () => void } {
  let release = (): void => undefined;
  const held = new Promise<void>((r) => (release = r));
  return { held, release };
}

/** Waits until `n` checks have joined a flight in progress. */
const untilJoined = (s: TestSidecar, n: number): Promise<void> =>
  vi.waitFor(async () => expect(await s.metric('consent_sidecar_upstream_coalesced_total')).toBe(n), PATIENTLY);

async function setup(reply: Reply | ((r: ReceivedRequest) => Reply), flags: Record<string, string> = {}): Promise<{ u: ScriptedUpstream; s: TestSidecar }> {
  upstream = await startUpstream(reply);
  // A held flight lasts until the test releases it: the deadline must outlast the joining, however slow.
  sidecar = await startTestSidecar(upstream.url, { 'upstream-timeout-ms': '60000', ...flags });
  return { u: upstream, s: sidecar };
}

describe('coalescing concurrent misses', () => {
  it('1000 concurrent identical misses against a slow upstream make exactly one upstream call, and all get ALLOW', async () => {
    const g = gate();
    const { u, s } = await setup(allowAsked({ hold: g.held }));
    const req = { userReference: 'user-herd', configKey: KEY };
    const pending = Promise.all(Array.from({ length: 1000 }, () => s.check(req)));
    await untilJoined(s, 999);
    g.release();
    const answers = await pending;
    expect(u.checks).toBe(1);
    expect(answers.every((a) => a.status === 200 && a.json?.decision === 'ALLOW')).toBe(true);
    expect(new Set(answers.map((a) => a.text)).size).toBe(1);
    expect(answers.every((a) => a.source === 'upstream' || a.source === 'cache')).toBe(true);
    const joined = await s.metric('consent_sidecar_upstream_coalesced_total');
    const hits = answers.filter((a) => a.source === 'cache').length;
    expect(joined + hits).toBe(999);
    expect(joined).toBeGreaterThan(0);
  });

  it('concurrent misses for different keys make one call per key', async () => {
    const g = gate();
    const { u, s } = await setup(allowAsked({ hold: g.held }));
    const reqs = Array.from({ length: 10 }, (_, i) => ({ userReference: `user-${i}`, configKey: KEY }));
    const pending = Promise.all(reqs.flatMap((r) => Array.from({ length: 20 }, () => s.check(r))));
    await untilJoined(s, 190);
    g.release();
    const answers = await pending;
    expect(answers.every((a) => a.json?.decision === 'ALLOW')).toBe(true);
    expect(u.checks).toBe(10);
    const users = u.requests.map((r) => (JSON.parse(r.body) as { userReference: string }).userReference).sort();
    expect(users).toEqual(reqs.map((r) => r.userReference).sort());
  });

  it('a coalesced failure fails every joined check closed, and is not remembered', async () => {
    const g = gate();
    const { u, s } = await setup({ status: 500, hold: g.held });
    const req = { userReference: 'user-herd', configKey: KEY };
    const pending = Promise.all(Array.from({ length: 50 }, () => s.check(req)));
    await untilJoined(s, 49);
    g.release();
    const answers = await pending;
    expect(u.checks).toBe(1);
    expect(answers.every((a) => a.status === 503 && a.json?.error === 'upstream_5xx')).toBe(true);
    u.reply(allowAsked());
    expect((await s.check(req)).json?.decision).toBe('ALLOW');
    expect(u.checks).toBe(2);
  });

  it('a coalesced evaluated denial reaches every joined check and is not cached', async () => {
    const g = gate();
    const { u, s } = await setup({ body: deny(KEY), hold: g.held });
    const req = { userReference: 'user-herd', configKey: KEY };
    const pending = Promise.all(Array.from({ length: 50 }, () => s.check(req)));
    await untilJoined(s, 49);
    g.release();
    const answers = await pending;
    expect(u.checks).toBe(1);
    expect(answers.every((a) => a.status === 200 && a.json?.decision === 'DENY')).toBe(true);
    await s.check(req);
    expect(u.checks).toBe(2);
  });
});

describe('a purge while an upstream call is in flight', () => {
  const purges: [string, (s: TestSidecar, user: string) => Promise<void>][] = [
    [
      'DELETE /sidecar/cache',
      async (s) => {
        expect((await s.send('DELETE', '/sidecar/cache')).status).toBe(200);
      },
    ],
    [
      'DELETE /sidecar/cache?userReference=',
      async (s, user) => {
        expect((await s.send('DELETE', `/sidecar/cache?userReference=${encodeURIComponent(user)}`)).status).toBe(200);
      },
    ],
    [
      'revocations.revokeUser',
      async (s, user) => {
        s.handle.revocations.revokeUser(user);
      },
    ],
    [
      'revocations.revokeAll',
      async (s) => {
        s.handle.revocations.revokeAll();
      },
    ],
  ];

  it.each(purges)('%s: a request arriving after it does not join the old flight', async (_name, purge) => {
    const g = gate();
    const { u, s } = await setup(allowAsked({ hold: g.held }));
    const req = { userReference: 'user-revoked', configKey: KEY };
    const first = s.check(req);
    await u.waitForCount(1);
    await purge(s, req.userReference);
    const second = s.check(req);
    await u.waitForCount(2); // the old flight is still held: the second request made its own
    g.release();
    expect(u.checks).toBe(2);
    expect((await first).json?.decision).toBe('ALLOW');
    expect((await second).json?.decision).toBe('ALLOW');
  });

  it.each(purges)("%s: the old flight's ALLOW is not written to the cache", async (_name, purge) => {
    const g = gate();
    const { u, s } = await setup(allowAsked({ hold: g.held }));
    const req = { userReference: 'user-revoked', configKey: KEY };
    const first = s.check(req);
    await u.waitForCount(1);
    await purge(s, req.userReference); // while the old flight is held
    g.release();
    // The app asked before the purge, so it may still get the answer computed then.
    expect((await first).json?.decision).toBe('ALLOW');
    expect(await s.metric('consent_sidecar_cache_entries')).toBe(0);
    const after = await s.check(req);
    expect(after.source).toBe('upstream');
    expect(u.checks).toBe(2);
  });
});

describe('Cache-Control: no-cache', () => {
  it("a no-cache refresh in flight during a purge does not write its ALLOW to the cache", async () => {
    const g = gate();
    const { u, s } = await setup(allowAsked({ hold: g.held }));
    const req = { userReference: 'user-revoked', configKey: KEY };
    const refresh = s.check(req, { 'cache-control': 'no-cache' });
    await u.waitForCount(1);
    s.handle.revocations.revokeUser(req.userReference);
    g.release();
    expect((await refresh).json?.decision).toBe('ALLOW');
    expect(await s.metric('consent_sidecar_cache_entries')).toBe(0);
    expect((await s.check(req)).source).toBe('upstream');
  });

  it("one key's no-cache burst is one call at a time, not one per request: it leaves the connections to other keys, and each request is answered by a call that started after it arrived", async () => {
    const g = gate();
    const A = { userReference: 'user-nc-burst', configKey: KEY };
    const B = { userReference: 'user-other', configKey: KEY };
    let callsForA = 0;
    // A's first call is held; the next one (started when it ends) says DENY: a newer answer than the first.
    const { u, s } = await setup(
      (r) => {
        const { userReference } = JSON.parse(r.body) as { userReference: string };
        if (userReference !== A.userReference) return { body: allow(KEY, Date.now() + 60_000) };
        return ++callsForA === 1 ? { hold: g.held, body: allow(KEY, Date.now() + 60_000) } : { body: deny(KEY) };
      },
      // Two connections: with a call per no-cache request, A's burst would take both and fill the queue.
      { 'upstream-connections': '2' },
    );
    const first = s.check(A, { 'cache-control': 'no-cache' });
    await u.waitForCount(1);
    // Arriving while A's first call is under way (it started before them): they share the next call,
    // which the first of them sets up and the other 29 join.
    const burst = Array.from({ length: 30 }, () => s.check(A, { 'cache-control': 'no-cache' }));
    await untilJoined(s, 29);
    expect(u.checks).toBe(1);
    // Another key still finds a connection: sent at once and answered by the service, not `overload`.
    const other = await s.check(B);
    expect(other.status).toBe(200);
    expect(other.source).toBe('upstream');
    expect(u.checks).toBe(2);
    g.release();
    expect((await first).json?.decision).toBe('ALLOW');
    // The burst never gets the answer of the call that started before it arrived: the one that followed.
    const answers = await Promise.all(burst);
    expect(answers.map((a) => a.json)).toEqual(Array(30).fill({ decision: 'DENY', configKey: KEY }));
    expect(answers.map((a) => a.source)).toEqual(Array(30).fill('upstream'));
    expect(callsForA).toBe(2);
    expect(await s.metric('consent_sidecar_fail_closed_total')).toBe(0);
  });

  it('a no-cache request that waits for the call under way and then the one after it is answered by its own deadline, not two: upstream_timeout while that next call is still out', async () => {
    const g = gate();
    const A = { userReference: 'user-nc-deadline', configKey: KEY };
    // Every call for A is held until the test ends: each ends by its deadline.
    const { u, s } = await setup(() => ({ hold: g.held, body: allow(KEY, Date.now() + 60_000) }), { 'upstream-timeout-ms': '1500' });
    const timedOut = (): Promise<number> => s.metric('consent_sidecar_upstream_request_duration_seconds_count', { outcome: 'timeout' });
    try {
      const first = s.check(A, { 'cache-control': 'no-cache' });
      await u.waitForCount(1);
      // Arrives while the first call is under way: it waits for that one, then for the one after it.
      const second = s.check(A, { 'cache-control': 'no-cache' });
      expect((await first).json).toMatchObject({ decision: 'DENY', error: 'upstream_timeout' });
      await u.waitForCount(2);
      const answer = await second;
      expect(answer.status).toBe(503);
      expect(answer.json).toMatchObject({ decision: 'DENY', error: 'upstream_timeout' });
      // Answered at its own deadline: the call after the first had not ended yet (one timeout so far, the first call's).
      expect(await timedOut()).toBe(1);
    } finally {
      g.release();
    }
  });

  it('a no-cache request joins the call for its key that started after it arrived (its headers came first, its body later)', async () => {
    const g = gate();
    const { u, s } = await setup(allowAsked({ hold: g.held }));
    const req = { userReference: 'user-nc-arrived', configKey: KEY };
    const body = JSON.stringify(req);
    // X's headers arrive now; its body only once the other request's call is under way.
    const x = request(`${s.handle.urls.decision}/v1/authorization/check`, {
      method: 'POST',
      headers: { 'cache-control': 'no-cache', 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
    });
    const xAnswer = new Promise<{ status: number; source: unknown; body: string }>((resolve, reject) => {
      x.on('error', reject).on('response', (res) => {
        let b = '';
        res.setEncoding('utf8').on('data', (c: string) => (b += c)).on('end', () => resolve({ status: res.statusCode!, source: res.headers['x-consent-decision-source'], body: b }));
      });
    });
    x.flushHeaders();
    // A round trip on another connection opened after them: the sidecar has read X's headers by then.
    await s.send('GET', '/not-a-route');
    const y = s.check(req, { 'cache-control': 'no-cache' });
    await u.waitForCount(1);
    x.end(body);
    await untilJoined(s, 1);
    g.release();
    expect((await y).json?.decision).toBe('ALLOW');
    const xa = await xAnswer;
    expect([xa.status, xa.source, (JSON.parse(xa.body) as { decision: string }).decision]).toEqual([200, 'upstream', 'ALLOW']);
    expect(u.checks).toBe(1);
  });

  it('skips a live entry (the service is asked) and refreshes it', async () => {
    const first = Date.now() + 60_000;
    const second = first + 30_000;
    const { u, s } = await setup({ body: allow(KEY, first) });
    const req = { userReference: 'user-nc', configKey: KEY };
    await s.check(req);
    expect((await s.check(req)).source).toBe('cache');
    u.reply({ body: allow(KEY, second) });
    const fresh = await s.check(req, { 'cache-control': 'no-cache' });
    expect(fresh.source).toBe('upstream');
    expect(fresh.json).toEqual({ decision: 'ALLOW', configKey: KEY, validUntil: second });
    expect(u.checks).toBe(2);
    const cached = await s.check(req);
    expect(cached.source).toBe('cache');
    expect(cached.json).toEqual({ decision: 'ALLOW', configKey: KEY, validUntil: second });
  });

  it.each(['no-cache', 'No-Cache', 'max-age=0, no-cache', 'no-cache, no-store'])('is recognised in "%s"', async (value) => {
    const { u, s } = await setup(allowAsked());
    const req = { userReference: 'user-nc', configKey: KEY };
    await s.check(req);
    expect((await s.check(req, { 'cache-control': value })).source).toBe('upstream');
    expect(u.checks).toBe(2);
  });

  it('a fresh DENY under no-cache removes the cached ALLOW', async () => {
    const { u, s } = await setup(allowAsked());
    const req = { userReference: 'user-nc', configKey: KEY };
    await s.check(req);
    expect((await s.check(req)).source).toBe('cache');
    u.reply({ body: deny(KEY) });
    const r = await s.check(req, { 'cache-control': 'no-cache' });
    expect(r.json).toEqual({ decision: 'DENY', configKey: KEY });
    const next = await s.check(req);
    expect(next.source).toBe('upstream');
    expect(next.json).toEqual({ decision: 'DENY', configKey: KEY });
    expect(u.checks).toBe(3);
  });

  it('a fresh pre-evaluation denial under no-cache removes the cached ALLOW too', async () => {
    const { u, s } = await setup(allowAsked());
    const req = { userReference: 'user-nc', configKey: KEY };
    await s.check(req);
    u.reply({ body: { decision: 'DENY', reason: 'customer_not_found' } });
    await s.check(req, { 'cache-control': 'no-cache' });
    expect((await s.check(req)).source).toBe('upstream');
  });

  it('a failure under no-cache fails closed (503), never falls back to the cached ALLOW', async () => {
    const { u, s } = await setup(allowAsked());
    const req = { userReference: 'user-nc', configKey: KEY };
    await s.check(req);
    u.reply({ status: 500 });
    const r = await s.check(req, { 'cache-control': 'no-cache' });
    expect(r.status).toBe(503);
    expect(r.json).toEqual({ decision: 'DENY', error: 'upstream_5xx' });
  });
});

describe('DELETE /sidecar/cache', () => {
  it('purges every entry', async () => {
    const { u, s } = await setup(allowAsked());
    const a = { userReference: 'user-a', configKey: KEY };
    const b = { userReference: 'user-b', configKey: KEY };
    await s.check(a);
    await s.check(b);
    expect(await s.metric('consent_sidecar_cache_entries')).toBe(2);
    const r = await s.send('DELETE', '/sidecar/cache');
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ purged: 2 });
    expect(await s.metric('consent_sidecar_cache_entries')).toBe(0);
    expect((await s.check(a)).source).toBe('upstream');
    expect((await s.check(b)).source).toBe('upstream');
    expect(u.checks).toBe(4);
  });

  it('?userReference= purges only that user\'s entries (all of their configKeys); other users stay cached', async () => {
    const { s } = await setup(allowAsked());
    const a1 = { userReference: 'user a&1', configKey: KEY };
    const a2 = { userReference: 'user a&1', configKey: 'flow-second' };
    const b = { userReference: 'user-b', configKey: KEY };
    for (const r of [a1, a2, b]) await s.check(r);
    const r = await s.send('DELETE', `/sidecar/cache?userReference=${encodeURIComponent('user a&1')}`);
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ purged: 2 });
    expect((await s.check(b)).source).toBe('cache');
    expect((await s.check(a1)).source).toBe('upstream');
    expect((await s.check(a2)).source).toBe('upstream');
  });

  it('purging a user with no entries purges nothing else', async () => {
    const { s } = await setup(allowAsked());
    const b = { userReference: 'user-b', configKey: KEY };
    await s.check(b);
    expect((await s.send('DELETE', '/sidecar/cache?userReference=nobody')).json).toEqual({ purged: 0 });
    expect((await s.check(b)).source).toBe('cache');
  });

  it('an empty or repeated userReference is refused (400) and purges nothing', async () => {
    const { s } = await setup(allowAsked());
    const b = { userReference: 'user-b', configKey: KEY };
    await s.check(b);
    expect((await s.send('DELETE', '/sidecar/cache?userReference=')).status).toBe(400);
    expect((await s.send('DELETE', '/sidecar/cache?userReference=a&userReference=b')).status).toBe(400);
    expect((await s.check(b)).source).toBe('cache');
  });

  it('counts purged entries by trigger', async () => {
    const { s } = await setup(allowAsked());
    await s.check({ userReference: 'user-a', configKey: KEY });
    await s.check({ userReference: 'user-b', configKey: KEY });
    await s.send('DELETE', '/sidecar/cache?userReference=user-a');
    s.handle.revocations.revokeUser('user-b');
    expect(await s.metric('consent_sidecar_cache_purged_entries_total', { trigger: 'manual' })).toBe(1);
    expect(await s.metric('consent_sidecar_cache_purged_entries_total', { trigger: 'webhook' })).toBe(1);
  });

  it('purges a user reference with non-ASCII characters, +, & and = by its URL-encoded form', async () => {
    const { s } = await setup(allowAsked());
    const odd = 'Zoë+😀 a&b=c';
    await s.check({ userReference: odd, configKey: KEY });
    await s.check({ userReference: 'Zoë', configKey: KEY });
    expect((await s.send('DELETE', `/sidecar/cache?userReference=${encodeURIComponent(odd)}`)).json).toEqual({ purged: 1 });
    expect((await s.check({ userReference: odd, configKey: KEY })).source).toBe('upstream');
    expect((await s.check({ userReference: 'Zoë', configKey: KEY })).source).toBe('cache');
  });

  it('keeps its per-user index right when entries are evicted (--cache-max-entries) or refreshed', async () => {
    const { s } = await setup(allowAsked(), { 'cache-max-entries': '2' });
    const a = { userReference: 'user-a', configKey: KEY };
    const b = { userReference: 'user-b', configKey: KEY };
    const c = { userReference: 'user-c', configKey: KEY };
    await s.check(a);
    await s.check(b);
    await s.check(c); // evicts a
    expect(await s.metric('consent_sidecar_cache_entries')).toBe(2);
    expect((await s.send('DELETE', '/sidecar/cache?userReference=user-a')).json).toEqual({ purged: 0 });
    expect((await s.check(c)).source).toBe('cache');
    await s.check(b, { 'cache-control': 'no-cache' }); // refreshed in place
    expect((await s.send('DELETE', '/sidecar/cache?userReference=user-b')).json).toEqual({ purged: 1 });
    expect((await s.check(b)).source).toBe('upstream');
    expect((await s.check(a)).source).toBe('upstream'); // evicts c (least recently used)
    expect((await s.send('DELETE', '/sidecar/cache?userReference=user-a')).json).toEqual({ purged: 1 });
    expect((await s.check(a)).source).toBe('upstream');
  });
});
