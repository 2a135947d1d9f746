/**
 * `node --expose-gc --import tsx test/bench/cache-memory.ts [entries]`: heap bytes per cached
 * ALLOW (JS heap plus array buffers, after forced GCs; userReference and configKey of 15 characters each, one user per entry,
 * 1,000 configKeys), time of a purge of everything, and a hit's p99 in this process at that size.
 * Prints one JSON line.
 */
import { performance } from 'node:perf_hooks';
import { AllowCache, cacheKey } from '../../src/decision/index.js';

const N = Number(process.argv[2] ?? 1_000_000);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');
const user = (i: number): string => `user-${String(i).padStart(10, '0')}`;
const config = (i: number): string => `cfg-${String(i % 1000).padStart(11, '0')}`;

gc();
gc();
// The typed arrays' backing stores live outside the JS heap: count them too.
const used = (): number => process.memoryUsage().heapUsed + process.memoryUsage().arrayBuffers;
const before = used();
const cache = new AllowCache({ maxEntries: N, safetyMarginMs: 1000, maxTtlMs: 3_600_000 });
const now = Date.now();
const g = cache.generation;
let t = performance.now();
for (let i = 0; i < N; i++) {
  const u = user(i);
  const k = config(i);
  cache.setAllow(cacheKey({ userReference: u, configKey: k }), u, { kind: 'allow', configKey: k, validUntil: now + 3_000_000 }, now + 2_000_000, g);
}
const fillMs = performance.now() - t;
gc();
gc();
const bytesPerEntry = (used() - before) / N;
// hit latency: 200k gets of random present keys (keys built outside the timed region)
const probes = Array.from({ length: 200_000 }, () => {
  const i = Math.floor(Math.random() * N);
  return cacheKey({ userReference: user(i), configKey: config(i) });
});
const lat = new Float64Array(probes.length);
for (let j = 0; j < probes.length; j++) {
  const t0 = performance.now();
  if (!cache.get(probes[j]!)) throw new Error('miss');
  lat[j] = performance.now() - t0;
}
lat.sort();
t = performance.now();
const revokedUser = cache.revokeUser(user(7));
const revokeUserMs = performance.now() - t;
t = performance.now();
const purged = cache.revokeAll();
const revokeAllMs = performance.now() - t;
console.log(JSON.stringify({ entries: N, bytesPerEntry: Math.round(bytesPerEntry), fillMs: Math.round(fillMs), getP50us: lat[lat.length >> 1]! * 1000, getP99us: lat[Math.floor(lat.length * 0.99)]! * 1000, revokeUserMs, revokedUser, revokeAllMs, purged }));
