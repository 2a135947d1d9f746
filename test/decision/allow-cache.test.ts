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
    ['earlier by the skew when the service clock is ahead (local clock behind)', T0 + 60_000, T0 + 30_000, T0 + 29_000],
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
