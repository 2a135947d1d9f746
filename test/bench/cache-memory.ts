/**
 * `node --expose-gc --import tsx test/bench/cache-memory.ts [entries]`: heap bytes per cached
 * ALLOW (JS heap plus array buffers, after forced GCs; userReference and configKey of 15 characters each, one user per entry,
 * 1,000 configKeys; each ALLOW made by the parser from a service body, as in the sidecar), time of a purge of everything, and a hit's p99 in this process at that size.
 * Prints one JSON line.
 */
import { performance } from 'node:perf_hooks';
import { AllowCache, cacheKey, DecisionMetrics } from '../../src/decision/index.js';
import { createRegistry } from '../../src/observability/index.js';
import { allowedFor } from '../helpers/allowed.js';

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
  // As the decision service does: the service's ALLOW through the parser, asked with the cache's copy
  // of the configKey. Each its own validUntil, as the service's answers have: an entry holds it.
  cache.setAllow(cacheKey({ userReference: u, configKey: k }), u, allowedFor(k, now + 3_000_000 + i, now, cache.sharedConfigKey(k)), now + 2_000_000, g);
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
  if (!cache.lookup(probes[j]!)) throw new Error('miss');
  lat[j] = performance.now() - t0;
}
lat.sort();
// A scrape as the sidecar wires it (bounded sweep, then the count): slowest of 20.
const registry = createRegistry({ defaultMetrics: false });
new DecisionMetrics(registry, () => (cache.sweep(), cache.size));
let scrapeMaxMs = 0;
for (let j = 0; j < 20; j++) {
  const t0 = performance.now();
  await registry.metrics();
  scrapeMaxMs = Math.max(scrapeMaxMs, performance.now() - t0);
}
t = performance.now();
const revokedUser = cache.revokeUser(user(7));
const revokeUserMs = performance.now() - t;
t = performance.now();
const purged = cache.revokeAll();
const revokeAllMs = performance.now() - t;
// Worst case for one sweep step: every entry dead at once (a clock that jumped): 4096 heap pops.
const dying = new AllowCache({ maxEntries: N, safetyMarginMs: 0, maxTtlMs: 3_600_000 }, () => clockMs);
let clockMs = now;
for (let i = 0; i < N; i++) {
  const u = user(i);
  const k = config(i);
  dying.setAllow(cacheKey({ userReference: u, configKey: k }), u, allowedFor(k, now + 60_000 + i, now, dying.sharedConfigKey(k)), now + 50_000 + i, 0);
}
clockMs = now + 10_000_000;
let sweepStepMaxMs = 0;
for (let j = 0; j < 20; j++) {
  const t0 = performance.now();
  dying.sweep();
  sweepStepMaxMs = Math.max(sweepStepMaxMs, performance.now() - t0);
}
console.log(JSON.stringify({ scrapeMaxMs, sweepStepMaxMs, entries: N, bytesPerEntry: Math.round(bytesPerEntry), fillMs: Math.round(fillMs), getP50us: lat[lat.length >> 1]! * 1000, getP99us: lat[Math.floor(lat.length * 0.99)]! * 1000, revokeUserMs, revokedUser, revokeAllMs, purged }));
