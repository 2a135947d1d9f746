import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AllowCache, cacheKey, deathOf, decisionAnswer } from '../../src/decision/index.js';
import type { AllowedDecision } from '../../src/decision/index.js';
import { allowedFor } from '../helpers/allowed.js';

const cfg = { maxEntries: 100, safetyMarginMs: 1000, maxTtlMs: 3_600_000 };
const T0 = 1_800_000_000_000;

/** The service's ALLOW, through the parser (the cache's clocks are the tests' own, so it is read at epoch 0). */
function allow(configKey: string, validUntil: number): AllowedDecision {
  return allowedFor(configKey, validUntil);
}

const K = (userReference: string, configKey: string): string => cacheKey({ userReference, configKey });

function clock(start = T0) {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms), set: (ms: number) => (t = ms) };
}

describe('deathOf', () => {
  it.each([
    ['validUntil minus the margin', T0 + 60_000, undefined, T0 + 59_000],
    ['capped by the max TTL', T0 + 10 * 3_600_000, undefined, T0 + 3_600_000],
    // The Date header is read as the last instant of its second (+999 ms): before that rule this
    // case expected T0 + 29_000, which let a zero margin outlive validUntil by up to 999 ms.
    ['earlier by the skew when the service clock is ahead (local clock behind)', T0 + 60_000, T0 + 30_000, T0 + 28_001],
    ['a Date equal to our clock may still be 999 ms ahead of us', T0 + 60_000, T0, T0 + 58_001],
    ['unchanged when the service clock is behind (local clock ahead)', T0 + 60_000, T0 - 30_000, T0 + 59_000],
  ])('%s', (_name, validUntil, serviceNow, expected) => {
    expect(deathOf(validUntil, T0, serviceNow, cfg)).toBe(expected);
  });
});

describe('AllowCache', () => {
  it('keys on the whole request without ambiguity', () => {
    expect(cacheKey({ userReference: 'ab', configKey: 'c' })).not.toBe(cacheKey({ userReference: 'a', configKey: 'bc' }));
  });

  it('serves an entry until its death and never after; reads do not extend it', () => {
    const c = clock();
    const cache = new AllowCache(cfg, c.now);
    const key = cacheKey({ userReference: 'u', configKey: 'k' });
    expect(cache.setAllow(key, 'u', allow('k', T0 + 10_000), T0 + 9_000, cache.generation)).toBe(true);
    for (let i = 0; i < 8; i++) {
      c.advance(1000);
      expect(cache.lookup(key)).toBeDefined();
    }
    c.set(T0 + 8_999);
    expect(cache.lookup(key)).toBeDefined();
    c.set(T0 + 9_000);
    expect(cache.lookup(key)).toBeUndefined();
    // Once dead it is gone for good, even if the clock went back.
    c.set(T0);
    expect(cache.lookup(key)).toBeUndefined();
  });

  it('refuses an entry born dead', () => {
    const c = clock();
    const cache = new AllowCache(cfg, c.now);
    expect(cache.setAllow(K('u', 'k'), 'u', allow('k', T0 + 500), T0, cache.generation)).toBe(false);
    expect(cache.size).toBe(0);
  });

  it('drops a write whose call started before a purge (revocation race)', () => {
    const cache = new AllowCache(cfg, clock().now);
    const before = cache.generation;
    cache.revokeUser('u');
    expect(cache.setAllow(K('u', 'k'), 'u', allow('k', T0 + 60_000), T0 + 59_000, before)).toBe(false);
    expect(cache.lookup(K('u', 'k'))).toBeUndefined();
  });

  it('purges by user, leaving others, and everything with revokeAll', () => {
    const cache = new AllowCache(cfg, clock().now);
    const g = cache.generation;
    for (const [u, k] of [['u1', 'a'], ['u1', 'b'], ['u2', 'a']] as const) {
      cache.setAllow(cacheKey({ userReference: u, configKey: k }), u, allow(k, T0 + 60_000), T0 + 59_000, g);
    }
    expect(cache.revokeUser('u1')).toBe(2);
    expect(cache.lookup(cacheKey({ userReference: 'u1', configKey: 'a' }))).toBeUndefined();
    expect(cache.lookup(cacheKey({ userReference: 'u2', configKey: 'a' }))).toBeDefined();
    expect(cache.revokeUser('nobody')).toBe(0);
    expect(cache.revokeAll()).toBe(1);
    expect(cache.size).toBe(0);
  });

  it('keeps the user index right through LRU eviction', () => {
    const cache = new AllowCache({ ...cfg, maxEntries: 2 }, clock().now);
    const g = cache.generation;
    cache.setAllow(K('u1', 'k1'), 'u1', allow('a', T0 + 60_000), T0 + 59_000, g);
    cache.setAllow(K('u2', 'k2'), 'u2', allow('a', T0 + 60_000), T0 + 59_000, g);
    cache.setAllow(K('u3', 'k3'), 'u3', allow('a', T0 + 60_000), T0 + 59_000, g);
    expect(cache.size).toBe(2);
    expect(cache.revokeUser('u1')).toBe(0);
    expect(cache.revokeUser('u3')).toBe(1);
  });

  it('is off with maxEntries 0', () => {
    const cache = new AllowCache({ ...cfg, maxEntries: 0 }, clock().now);
    expect(cache.setAllow(K('u', 'k'), 'u', allow('k', T0 + 60_000), T0 + 59_000, cache.generation)).toBe(false);
    expect(cache.lookup(K('u', 'k'))).toBeUndefined();
  });

  it('sweeps dead entries', () => {
    const c = clock();
    const cache = new AllowCache(cfg, c.now);
    cache.setAllow(K('u', 'k1'), 'u', allow('a', T0 + 5_000), T0 + 4_000, cache.generation);
    cache.setAllow(K('u', 'k2'), 'u', allow('b', T0 + 60_000), T0 + 59_000, cache.generation);
    c.advance(4_000);
    expect(cache.sweep()).toBe(1);
    expect(cache.size).toBe(1);
  });
});

describe('AllowCache: the compact store', () => {
  it('serves the very bytes decisionAnswer would write, any configKey', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 40, unit: 'binary' }), fc.integer({ min: T0 + 10_000, max: Number.MAX_SAFE_INTEGER }), (k, validUntil) => {
        const cache = new AllowCache(cfg, clock().now);
        cache.setAllow(K('u', 'key'), 'u', allow(k, validUntil), T0 + 5_000, cache.generation);
        const expected = decisionAnswer(allow(k, validUntil), 'cache');
        expect(cache.lookup(K('u', 'key'))?.answer).toEqual({ ...expected });
      }),
      { numRuns: 300 },
    );
  });

  it("refuses a key that is not the user's (a user purge could not find it)", () => {
    const cache = new AllowCache(cfg, clock().now);
    expect(cache.setAllow(K('u2', 'k'), 'u', allow('k', T0 + 60_000), T0 + 59_000, cache.generation)).toBe(false);
    expect(cache.size).toBe(0);
  });

  it('evicts the least recently used when full; a read makes an entry recent', () => {
    const cache = new AllowCache({ ...cfg, maxEntries: 3 }, clock().now);
    const g = cache.generation;
    for (const k of ['a', 'b', 'c']) cache.setAllow(K(k, k), k, allow(k, T0 + 60_000), T0 + 59_000, g);
    expect(cache.lookup(K('a', 'a'))).toBeDefined();
    cache.setAllow(K('d', 'd'), 'd', allow('d', T0 + 60_000), T0 + 59_000, g);
    expect(cache.size).toBe(3);
    expect(cache.lookup(K('b', 'b'))).toBeUndefined();
    expect(['a', 'c', 'd'].map((k) => cache.lookup(K(k, k))?.answer.decision)).toEqual(['allow', 'allow', 'allow']);
  });

  it('when full, a dead entry goes before a live least recently used one', () => {
    const c = clock();
    const cache = new AllowCache({ ...cfg, maxEntries: 2 }, c.now);
    const g = cache.generation;
    cache.setAllow(K('u1', 'old'), 'u1', allow('a', T0 + 60_000), T0 + 59_000, g);
    cache.setAllow(K('u2', 'short'), 'u2', allow('a', T0 + 3_000), T0 + 2_000, g);
    c.advance(2_000);
    cache.setAllow(K('u3', 'new'), 'u3', allow('a', T0 + 60_000), T0 + 59_000, g);
    expect(cache.lookup(K('u1', 'old'))).toBeDefined();
    expect(cache.lookup(K('u3', 'new'))).toBeDefined();
  });

  it('a user purge takes exactly that user, whatever shares its hash bucket (random model check)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom('u', 'uu', 'u1', 'x', '1:u'), fc.constantFrom('a', 'b', 'ua')), { maxLength: 30 }),
        fc.constantFrom('u', 'uu', 'u1', 'x', '1:u'),
        (writes, victim) => {
          // 2 user buckets: users share them.
          const big = new AllowCache({ ...cfg, maxEntries: 64 }, clock().now, undefined, 2);
          const model = new Map<string, string>();
          for (const [u, k] of writes) {
            const key = cacheKey({ userReference: u, configKey: k });
            big.setAllow(key, u, allow(k, T0 + 60_000), T0 + 59_000, big.generation);
            model.set(key, u);
          }
          const expected = [...model].filter(([, u]) => u === victim).length;
          expect(big.revokeUser(victim)).toBe(expected);
          for (const [key, u] of model) expect(big.lookup(key) !== undefined).toBe(u !== victim);
          expect(big.size).toBe(model.size - expected);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('stays consistent under random writes, reads, deletes, purges and time (model check)', () => {
    type Op = { op: 'set' | 'get' | 'del' | 'revokeUser' | 'sweep' | 'revokeAll' | 'advance'; u: number; k: number; life: number };
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            op: fc.constantFrom<Op['op']>('set', 'set', 'set', 'get', 'get', 'del', 'revokeUser', 'sweep', 'revokeAll', 'advance'),
            u: fc.integer({ min: 0, max: 5 }),
            k: fc.integer({ min: 0, max: 3 }),
            life: fc.integer({ min: 1, max: 5_000 }),
          }),
          { maxLength: 120, size: 'max' },
        ),
        (ops: Op[]) => {
          const c = clock();
          // Both clocks advance together here (the monotonic one as an offset of the wall one).
          const cache = new AllowCache({ ...cfg, maxEntries: 1000 }, c.now, () => c.now() - T0);
          const model = new Map<string, { u: string; diesAt: number; k: string; validUntil: number }>();
          for (const o of ops) {
            const u = `user${o.u}`;
            const key = cacheKey({ userReference: u, configKey: `k${o.k}` });
            if (o.op === 'set') {
              const validUntil = c.now() + o.life + 1_000;
              expect(cache.setAllow(key, u, allow(`k${o.k}`, validUntil), c.now() + o.life, cache.generation)).toBe(true);
              model.set(key, { u, diesAt: c.now() + o.life, k: `k${o.k}`, validUntil });
            } else if (o.op === 'get') {
              const m = model.get(key);
              const live = m !== undefined && m.diesAt > c.now();
              const hit = cache.lookup(key);
              expect(hit !== undefined).toBe(live);
              // The answer is the live entry's own (its configKey and validUntil), never an earlier entry's.
              if (live) expect(hit?.answer).toEqual({ ...decisionAnswer(allow(m.k, m.validUntil), 'cache') });
              if (!live) model.delete(key);
            } else if (o.op === 'del') {
              cache.delete(key);
              model.delete(key);
            } else if (o.op === 'revokeUser') {
              const n = [...model].filter(([, m]) => m.u === u).length;
              expect(cache.revokeUser(u)).toBe(n);
              for (const [k2, m] of model) if (m.u === u) model.delete(k2);
            } else if (o.op === 'sweep') {
              const dead = [...model].filter(([, m]) => m.diesAt <= c.now());
              expect(cache.sweep()).toBe(dead.length);
              for (const [k2] of dead) model.delete(k2);
            } else if (o.op === 'revokeAll') {
              expect(cache.revokeAll()).toBe(model.size);
              model.clear();
            } else c.advance(o.life);
            expect(cache.size).toBe(model.size);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  // The model above predicts every read exactly, so it keeps the cache far from full and its two
  // clocks together. This one fills it (8 slots, 24 keys: eviction on most writes) and moves the
  // wall clock away from the monotonic one in both directions (NTP steps, a VM resumed), and holds
  // the cache to what must stay true whatever it evicts: a read answers only an ALLOW the service
  // gave for that very key, unexpired on the true clock (the monotonic one) and not purged since.
  it('full and with the wall clock drifting from the monotonic one both ways: never an ALLOW after validUntil, after a purge, or not given (model check)', () => {
    type Op = { op: 'set' | 'get' | 'del' | 'revokeUser' | 'revokeAll' | 'sweep' | 'elapse' | 'stepWall'; u: number; k: number; ms: number };
    const SLOTS = 8;
    let runsThatEvicted = 0;
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            op: fc.oneof(
              { weight: 8, arbitrary: fc.constant<Op['op']>('set') },
              { weight: 6, arbitrary: fc.constant<Op['op']>('get') },
              { weight: 1, arbitrary: fc.constantFrom<Op['op']>('del', 'revokeUser', 'sweep', 'elapse', 'stepWall') },
              { weight: 1, arbitrary: fc.constantFrom<Op['op']>('revokeAll', 'set') },
            ),
            u: fc.integer({ min: 0, max: 5 }),
            k: fc.integer({ min: 0, max: 3 }),
            ms: fc.integer({ min: -3_600_000, max: 3_600_000 }),
          }),
          { maxLength: 200, size: 'max' },
        ),
        (ops: Op[]) => {
          // True time is the monotonic clock; the wall clock is it plus a skew that steps.
          let t = 10_000;
          let skew = 0;
          const wall = (): number => T0 + t + skew;
          const cache = new AllowCache({ ...cfg, safetyMarginMs: 0, maxEntries: SLOTS }, wall, () => t);
          /** What the service gave, by key: validUntil on the true clock, and whether a purge took it since. */
          const given = new Map<string, { configKey: string; validUntil: number; purged: boolean }>();
          let evicted = false;
          for (const o of ops) {
            const u = `user${o.u}`;
            const configKey = `k${o.k}`;
            const key = cacheKey({ userReference: u, configKey });
            const life = Math.abs(o.ms) % 20_000;
            if (o.op === 'set') {
              // The service's ALLOW, valid `life` more ms of true time; its death computed on the wall clock, as the service's answer is read.
              const validUntilTrue = T0 + t + life;
              const validUntil = validUntilTrue + skew;
              const full = cache.size === SLOTS;
              // Refused (born dead): whatever was cached under the key stays as it was.
              if (!cache.setAllow(key, u, allow(configKey, validUntil), wall() + life, cache.generation)) continue;
              if (full) evicted = true;
              given.set(key, { configKey, validUntil: validUntilTrue, purged: false });
            } else if (o.op === 'get') {
              const hit = cache.lookup(key);
              if (hit !== undefined) {
                const g = given.get(key);
                expect(g, `${key}: an ALLOW the service never gave`).toBeDefined();
                expect(g!.purged, `${key}: served after a purge`).toBe(false);
                expect(T0 + t, `${key}: served at or after validUntil on the true clock`).toBeLessThan(g!.validUntil);
                expect(hit.answer.decision).toBe('allow');
                expect(JSON.parse(hit.answer.body).configKey).toBe(g!.configKey);
              }
            } else if (o.op === 'del') {
              cache.delete(key);
              if (given.has(key)) given.get(key)!.purged = true;
            } else if (o.op === 'revokeUser') {
              cache.revokeUser(u);
              for (const [k2, g] of given) if (k2.startsWith(`${u.length}:${u}k`)) g.purged = true;
            } else if (o.op === 'revokeAll') {
              cache.revokeAll();
              for (const g of given.values()) g.purged = true;
            } else if (o.op === 'sweep') cache.sweep();
            else if (o.op === 'elapse') t += life;
            else skew += o.ms;
            expect(cache.size).toBeLessThanOrEqual(SLOTS);
          }
          if (evicted) runsThatEvicted++;
        },
      ),
      { numRuns: 300 },
    );
    // It does fill: most runs wrote into a full cache.
    expect(runsThatEvicted).toBeGreaterThan(150);
  });

  it('a sweep deletes at most its budget, soonest deaths first', () => {
    const c = clock();
    const cache = new AllowCache({ ...cfg, maxEntries: 1000 }, c.now);
    for (let i = 0; i < 100; i++) cache.setAllow(K(`u${i}`, 'k'), `u${i}`, allow('a', T0 + 60_000), T0 + 1_000 + i, cache.generation);
    c.advance(50_000);
    expect(cache.sweep(30)).toBe(30);
    expect(cache.size).toBe(70);
    expect(cache.sweep()).toBe(70);
  });
});

describe('AllowCache: the monotonic budget', () => {
  function clocks() {
    let wall = T0;
    let mono = 5_000;
    return {
      now: () => wall,
      mono: () => mono,
      stepWall: (ms: number) => (wall += ms),
      elapse: (ms: number) => {
        wall += ms;
        mono += ms;
      },
    };
  }

  it('a wall clock stepped back one hour does not keep an entry past the life it was given at write', () => {
    const c = clocks();
    const cache = new AllowCache(cfg, c.now, c.mono);
    const key = cacheKey({ userReference: 'u', configKey: 'k' });
    expect(cache.setAllow(key, 'u', allow('k', T0 + 5_000), T0 + 4_000, cache.generation)).toBe(true);
    c.stepWall(-3_600_000);
    c.elapse(3_999);
    expect(cache.lookup(key)).toBeDefined();
    c.elapse(1);
    // Wall clock says 59 min 56 s are left; the monotonic budget of 4 s is spent.
    expect(cache.lookup(key)).toBeUndefined();
  });

  it('sweep drops entries whose monotonic budget is spent', () => {
    const c = clocks();
    const cache = new AllowCache(cfg, c.now, c.mono);
    const key = cacheKey({ userReference: 'u', configKey: 'k' });
    cache.setAllow(key, 'u', allow('k', T0 + 5_000), T0 + 4_000, cache.generation);
    c.stepWall(-3_600_000);
    c.elapse(4_000);
    expect(cache.sweep()).toBe(1);
    expect(cache.size).toBe(0);
  });

  it('a wall clock stepped forward kills entries early (the safe direction)', () => {
    const c = clocks();
    const cache = new AllowCache(cfg, c.now, c.mono);
    const key = cacheKey({ userReference: 'u', configKey: 'k' });
    cache.setAllow(key, 'u', allow('k', T0 + 60_000), T0 + 59_000, cache.generation);
    c.stepWall(3_600_000);
    expect(cache.lookup(key)).toBeUndefined();
  });
});

describe('deathOf: a zero margin never outlives validUntil on the service clock', () => {
  it('whatever instant of its second the Date header was sent at', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -120_000, max: 120_000 }),
        fc.integer({ min: 0, max: 999 }),
        fc.integer({ min: 1, max: 600_000 }),
        (skew, subSecond, life) => {
          const serviceTrueNow = Math.floor((T0 + skew) / 1000) * 1000 + subSecond;
          const dateHeader = Math.floor(serviceTrueNow / 1000) * 1000;
          const validUntil = serviceTrueNow + life;
          const death = deathOf(validUntil, T0, dateHeader, { safetyMarginMs: 0, maxTtlMs: 3_600_000 });
          // Our death, converted to the service's clock, is no later than validUntil.
          expect(death + (serviceTrueNow - T0)).toBeLessThanOrEqual(validUntil);
        },
      ),
      { numRuns: 2000 },
    );
  });
});
