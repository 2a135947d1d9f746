/**
 * Cost of the fail-closed parser on the hot miss path: one 82-byte ALLOW, parsed many times.
 * `npx tsx test/bench/parse-response.ts` (BENCH_PARSE_ITERATIONS, default 2,000,000; best of 5 rounds).
 */
import { performance } from 'node:perf_hooks';
import { parseCheckResponse } from '../../src/decision/parse-response.js';

const ITERATIONS = Number(process.env.BENCH_PARSE_ITERATIONS ?? 2_000_000);
const NOW = Date.now();
const KEY = 'marketing-email-2026';
const body = JSON.stringify({ decision: 'ALLOW', configKey: KEY, validUntil: NOW + 3_600_000 });
const res = { status: 200, date: new Date(NOW).toUTCString(), body };

let sink = 0;
const rounds: number[] = [];
for (let round = 0; round < 5; round++) {
  const t0 = performance.now();
  for (let i = 0; i < ITERATIONS; i++) sink += parseCheckResponse(res, KEY, NOW).decision.kind.length;
  rounds.push(((performance.now() - t0) * 1e6) / ITERATIONS);
}
console.log(`parseCheckResponse, ${Buffer.byteLength(body)}-byte ALLOW with a Date header: best ${Math.min(...rounds).toFixed(0)} ns/op (rounds: ${rounds.map((r) => r.toFixed(0)).join(', ')} ns; sink ${sink})`);
