import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AllowCache, cacheKey, deathOf, decisionAnswer } from '../../src/decision/index.js';
import type { Answer } from '../../src/decision/index.js';

const cfg = { maxEntries: 100, safetyMarginMs: 1000, maxTtlMs: 3_600_000 };
const T0 = 1_800_000_000_000;

function allow(configKey: string, validUntil: number): Answer & { decision: 'allow' } {
  return decisionAnswer({ kind: 'allow', configKey, validUntil }, 'cache') as Answer & { decision: 'allow' };
}

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
      expect(cache.get(key)).toBeDefined();
    }
    c.set(T0 + 8_999);
    expect(cache.get(key)).toBeDefined();
    c.set(T0 + 9_000);
    expect(cache.get(key)).toBeUndefined();
    // Once dead it is gone for good, even if the clock went back.
    c.set(T0);
    expect(cache.get(key)).toBeUndefined();
  });

  it('refuses an entry born dead', () => {
    const c = clock();
    const cache = new AllowCache(cfg, c.now);
    expect(cache.setAllow('k', 'u', allow('k', T0 + 500), T0, cache.generation)).toBe(false);
    expect(cache.size).toBe(0);
  });

  it('drops a write whose call started before a purge (revocation race)', () => {
    const cache = new AllowCache(cfg, clock().now);
    const before = cache.generation;
    cache.revokeUser('u');
    expect(cache.setAllow('k', 'u', allow('k', T0 + 60_000), T0 + 59_000, before)).toBe(false);
    expect(cache.get('k')).toBeUndefined();
  });

  it('purges by user, leaving others, and everything with revokeAll', () => {
    const cache = new AllowCache(cfg, clock().now);
    const g = cache.generation;
    for (const [u, k] of [['u1', 'a'], ['u1', 'b'], ['u2', 'a']] as const) {
      cache.setAllow(cacheKey({ userReference: u, configKey: k }), u, allow(k, T0 + 60_000), T0 + 59_000, g);
    }
    expect(cache.revokeUser('u1')).toBe(2);
    expect(cache.get(cacheKey({ userReference: 'u1', configKey: 'a' }))).toBeUndefined();
    expect(cache.get(cacheKey({ userReference: 'u2', configKey: 'a' }))).toBeDefined();
    expect(cache.revokeUser('nobody')).toBe(0);
    expect(cache.revokeAll()).toBe(1);
    expect(cache.size).toBe(0);
  });

  it('keeps the user index right through LRU eviction', () => {
    const cache = new AllowCache({ ...cfg, maxEntries: 2 }, clock().now);
    const g = cache.generation;
    cache.setAllow('k1', 'u1', allow('a', T0 + 60_000), T0 + 59_000, g);
    cache.setAllow('k2', 'u2', allow('a', T0 + 60_000), T0 + 59_000, g);
    cache.setAllow('k3', 'u3', allow('a', T0 + 60_000), T0 + 59_000, g);
    expect(cache.size).toBe(2);
    expect(cache.revokeUser('u1')).toBe(0);
    expect(cache.revokeUser('u3')).toBe(1);
  });

  it('is off with maxEntries 0', () => {
    const cache = new AllowCache({ ...cfg, maxEntries: 0 }, clock().now);
    expect(cache.setAllow('k', 'u', allow('k', T0 + 60_000), T0 + 59_000, cache.generation)).toBe(false);
    expect(cache.get('k')).toBeUndefined();
  });

  it('sweeps dead entries', () => {
    const c = clock();
    const cache = new AllowCache(cfg, c.now);
    cache.setAllow('k1', 'u', allow('a', T0 + 5_000), T0 + 4_000, cache.generation);
    cache.setAllow('k2', 'u', allow('b', T0 + 60_000), T0 + 59_000, cache.generation);
    c.advance(4_000);
    expect(cache.sweep()).toBe(1);
    expect(cache.size).toBe(1);
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
    expect(cache.get(key)).toBeDefined();
    c.elapse(1);
    // Wall clock says 59 min 56 s are left; the monotonic budget of 4 s is spent.
    expect(cache.get(key)).toBeUndefined();
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
    expect(cache.get(key)).toBeUndefined();
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
