import { afterEach, describe, expect, it } from 'vitest';
import { startTestSidecar, testClock, type TestClock, type TestSidecar } from '../../helpers/sidecar.js';
import { allow, startUpstream, type Reply, type ScriptedUpstream } from '../../helpers/upstream.js';
import { untilWallClock } from '../../helpers/wait.js';

// The death of a cached ALLOW: fixed at write (validUntil − margin, earlier when the service's Date
// shows the local clock behind, capped by --cache-max-ttl-ms), never extended, never passed.

const KEY = 'flow-analytics';
const USER = 'user-expiry-1';
const REQ = { userReference: USER, configKey: KEY };
const MARGIN = 1000;

let upstream: ScriptedUpstream | undefined;
let sidecar: TestSidecar | undefined;

afterEach(async () => {
  await sidecar?.close();
  await upstream?.close();
  sidecar = undefined;
  upstream = undefined;
});

/** A sidecar on a frozen clock whose upstream answers ALLOW until `validUntil`, dated by the same clock unless told otherwise. */
async function frozen(
  validUntil: (c: TestClock) => number,
  flags: Record<string, string> = {},
  date: (c: TestClock) => number | null = (c) => c.now(),
): Promise<{ u: ScriptedUpstream; s: TestSidecar; clock: TestClock }> {
  const clock = testClock();
  const vu = validUntil(clock);
  upstream = await startUpstream((): Reply => ({ body: allow(KEY, vu), date: date(clock) }));
  sidecar = await startTestSidecar(upstream.url, { 'cache-safety-margin-ms': String(MARGIN), ...flags }, { now: clock.now });
  return { u: upstream, s: sidecar, clock };
}

const source = async (s: TestSidecar): Promise<string | undefined> => {
  const r = await s.check(REQ);
  expect(r.status).toBe(200);
  expect(r.json?.decision).toBe('ALLOW');
  return r.source;
};

describe('expiry under a frozen clock', () => {
  it('serves the entry until validUntil − margin and never at or after it', async () => {
    const { u, s, clock } = await frozen((c) => c.now() + 10_000);
    const t0 = clock.now();
    expect(await source(s)).toBe('upstream');
    // The Date header (t0, whole second) is read as t0 + 999 ms: death = t0 + 10 s − 999 − margin.
    // (Before the Date was read against us, the boundary was t0 + 9 s.)
    clock.set(t0 + 8_000);
    expect(await source(s)).toBe('cache');
    expect(u.checks).toBe(1);
    clock.set(t0 + 8_001);
    expect(await source(s)).toBe('upstream');
    expect(u.checks).toBe(2);
  });

  it('reading never extends the entry: many hits do not move its death', async () => {
    const { u, s, clock } = await frozen((c) => c.now() + 5_000);
    const t0 = clock.now();
    await source(s);
    // Death: t0 + 5 s − 999 ms (the Date read against us) − margin = t0 + 3,001 ms.
    for (let t = 100; t < 3_000; t += 300) {
      clock.set(t0 + t);
      expect(await source(s)).toBe('cache');
    }
    clock.set(t0 + 4_000);
    // The refreshed entry comes from an upstream whose validUntil is still t0 + 5 s: it is born dead.
    expect(await source(s)).toBe('upstream');
    expect(await source(s)).toBe('upstream');
    expect(u.checks).toBe(3);
  });

  it('--cache-max-ttl-ms caps the life of an entry whatever validUntil says', async () => {
    const { u, s, clock } = await frozen((c) => c.now() + 3_600_000, { 'cache-max-ttl-ms': '2000' });
    const t0 = clock.now();
    await source(s);
    clock.set(t0 + 1_999);
    expect(await source(s)).toBe('cache');
    clock.set(t0 + 2_000);
    expect(await source(s)).toBe('upstream');
    expect(u.checks).toBe(2);
  });

  it('--cache-max-entries 0 disables the cache', async () => {
    const { u, s } = await frozen((c) => c.now() + 60_000, { 'cache-max-entries': '0' });
    expect(await source(s)).toBe('upstream');
    expect(await source(s)).toBe('upstream');
    expect(u.checks).toBe(2);
  });

  it('an ALLOW valid for less than the margin is answered but not cached', async () => {
    const { u, s } = await frozen((c) => c.now() + 800);
    expect(await source(s)).toBe('upstream');
    expect(await source(s)).toBe('upstream');
    expect(u.checks).toBe(2);
    expect(await s.metric('consent_sidecar_cache_entries')).toBe(0);
  });
});

describe('the Date-header skew rule', () => {
  it("the service's Date says the local clock is 30 s behind → the entry dies 30 s earlier", async () => {
    const { u, s, clock } = await frozen(
      (c) => c.now() + 60_000,
      {},
      (c) => c.now() + 30_000,
    );
    const t0 = clock.now();
    expect(await source(s)).toBe('upstream');
    // 30 s behind per the Date, read against us (+999 ms, the header's resolution): 30,999 ms.
    clock.set(t0 + 28_000);
    expect(await source(s)).toBe('cache');
    clock.set(t0 + 28_001);
    expect(await source(s)).toBe('upstream');
    expect(u.checks).toBe(2);
  });

  it("the service's Date shows the local clock ahead → the death is unchanged", async () => {
    const { u, s, clock } = await frozen(
      (c) => c.now() + 60_000,
      {},
      (c) => c.now() - 30_000,
    );
    const t0 = clock.now();
    await source(s);
    clock.set(t0 + 58_999);
    expect(await source(s)).toBe('cache');
    clock.set(t0 + 59_000);
    expect(await source(s)).toBe('upstream');
    expect(u.checks).toBe(2);
  });

  it('no Date header, or an unparsable one → the death is validUntil − margin', async () => {
    for (const date of [null, 'not a date']) {
      const clock = testClock();
      const t0 = clock.now();
      const u = await startUpstream({ body: allow(KEY, t0 + 10_000), date });
      const s = await startTestSidecar(u.url, {}, { now: clock.now });
      try {
        expect(await source(s)).toBe('upstream');
        clock.set(t0 + 8_999);
        expect(await source(s)).toBe('cache');
        clock.set(t0 + 9_000);
        expect(await source(s)).toBe('upstream');
      } finally {
        await s.close();
        await u.close();
      }
    }
  });

  it("an ALLOW whose validUntil has passed per the service's Date → 503 expired_on_arrival", async () => {
    const clock = testClock();
    // Local clock says 20 s left; the service's own clock says it ended 10 s ago.
    upstream = await startUpstream({ body: allow(KEY, clock.now() + 20_000), date: clock.now() + 30_000 });
    sidecar = await startTestSidecar(upstream.url, {}, { now: clock.now });
    const r = await sidecar.check(REQ);
    expect(r.status).toBe(503);
    expect(r.json).toEqual({ decision: 'DENY', error: 'expired_on_arrival' });
    expect(await sidecar.metric('consent_sidecar_cache_entries')).toBe(0);
  });
});

describe('never served after death, even when the service is down', () => {
  const failures: [string, string, Reply][] = [
    ['a 500', 'upstream_5xx', { status: 500 }],
    ['resets', 'upstream_unreachable', { fault: 'reset' }],
    ['a timeout', 'upstream_timeout', { fault: 'hang' }],
    ['a malformed answer', 'malformed_response', { body: 'garbage' }],
  ];

  it.each(failures)('expired entry, then %s → 503 %s, not the stale ALLOW', async (_name, cause, failure) => {
    // A short deadline where only the service that never answers can meet it.
    const { u, s, clock } = await frozen((c) => c.now() + 10_000, cause === 'upstream_timeout' ? { 'upstream-timeout-ms': '300' } : {});
    const t0 = clock.now();
    expect(await source(s)).toBe('upstream');
    expect(await source(s)).toBe('cache');
    u.reply(failure);
    clock.set(t0 + 9_000);
    const r = await s.check(REQ);
    expect(r.status).toBe(503);
    expect(r.json).toEqual({ decision: 'DENY', error: cause });
  });

  it('expired entry with the service gone entirely → 503 upstream_unreachable; breaker open → circuit_open; never ALLOW', async () => {
    const { u, s, clock } = await frozen((c) => c.now() + 10_000, { 'breaker-failure-threshold': '2' });
    const t0 = clock.now();
    await source(s);
    await u.close();
    clock.set(t0 + 9_000);
    for (const cause of ['upstream_unreachable', 'upstream_unreachable', 'circuit_open']) {
      const r = await s.check(REQ);
      expect(r.status).toBe(503);
      expect(r.json).toEqual({ decision: 'DENY', error: cause });
    }
    // Even with the clock moved back, the dead entry was deleted, not kept aside.
    clock.set(t0 + 1_000);
    const back = await s.check(REQ);
    expect(back.status).toBe(503);
  });
});

describe('expiry under real time', () => {
  it('an ALLOW valid for 4.5 s with a 1 s margin is cached at most 3.5 s, then the service is asked again', async () => {
    // node:http's own Date header is read as up to 999 ms ahead of us, so the entry may die as early
    // as validUntil - 2 s: 4.5 s leaves the second check 2.5 s to be a hit, even on a slow machine.
    const validUntil = Date.now() + 4_500;
    upstream = await startUpstream({ body: allow(KEY, validUntil) });
    sidecar = await startTestSidecar(upstream.url, { 'cache-safety-margin-ms': '1000' });
    expect((await sidecar.check(REQ)).source).toBe('upstream');
    const second = await sidecar.check(REQ);
    expect(second.source).toBe('cache');
    await untilWallClock(validUntil - 1_000 + 100);
    const third = await sidecar.check(REQ);
    expect(third.source).toBe('upstream');
    expect(third.json).toEqual({ decision: 'ALLOW', configKey: KEY, validUntil });
    expect(upstream.checks).toBeGreaterThanOrEqual(2);
    await untilWallClock(validUntil + 50);
    // Past validUntil itself the service's ALLOW is expired on arrival: fail closed.
    const fourth = await sidecar.check(REQ);
    expect(fourth.status).toBe(503);
    expect(fourth.json).toEqual({ decision: 'DENY', error: 'expired_on_arrival' });
  });
});
