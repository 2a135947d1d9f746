/**
 * The batch check (POST /sidecar/authorization/check-batch) against single checks on the same real
 * `serve` process, the load in its own process (wrk):
 * - cost: a batch of 10 cached items against one cached check, req/s on 50 connections; the
 *   goal is a batch costing at most 3 single checks (single req/s ÷ batch req/s ≤ 3);
 * - latency: a batch of 10 distinct misses against one miss, one request at a time (each a user
 *   reference never asked before, so each item goes to the service, which answers after
 *   BENCH_SERVICE_DELAY_MS, 10 by default: a service across a network, not one on loopback whose
 *   answer costs less than our own CPU per item); the goal is at most 1.5 × one miss's latency
 *   (the items are asked at once, not one after another).
 *
 * Alone: `npm run build && node --import tsx test/bench/batch.ts`.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { closedLoop, compare, comparisonLines, fmt, freePort, LOAD_GENERATOR, startChild, stopChild, type Comparison } from './lib.js';

const CLI = process.env.BENCH_CLI ?? fileURLToPath(new URL('../../dist/cli.js', import.meta.url));
const BASELINES = fileURLToPath(new URL('./baselines.mjs', import.meta.url));
const CHECK = '/v1/authorization/check';
const BATCH = '/sidecar/authorization/check-batch';
const ITEMS = 10;
const SERVICE_DELAY_MS = Number(process.env.BENCH_SERVICE_DELAY_MS ?? 10);

export interface BatchBench {
  readonly cost: Comparison;
  /** Sequential latency (ms, median and p99) of one miss and of a batch of 10 misses. */
  readonly latency: { readonly single: { p50: number; p99: number }; readonly batch: { p50: number; p99: number } };
}

/** A wrk request file of `count` requests, each built by `body(n)` (format of lib.ts `requestFile`). */
function requestFile(dir: string, name: string, count: number, body: (n: number) => string): string {
  const file = join(dir, name);
  writeFileSync(file, `${Array.from({ length: count }, (_, n) => `content-type: application/json\t${body(n)}`).join('\n')}\n`);
  return file;
}

export async function benchBatch(o: { rounds: number; durationS: number; connections: number }): Promise<BatchBench | null> {
  if (LOAD_GENERATOR !== 'wrk') {
    console.log('Batch: skipped, the miss stream needs wrk (apt-get install wrk)\n');
    return null;
  }
  const dir = mkdtempSync(join(tmpdir(), 'bench-batch-'));
  const stops: (() => Promise<void>)[] = [];
  try {
    const upPort = await freePort();
    const up = await startChild(process.execPath, [BASELINES, 'upstream', String(upPort), String(Date.now() + 3_600_000), String(SERVICE_DELAY_MS)], `http://127.0.0.1:${upPort}/ready`);
    stops.push(() => stopChild(up));
    const [port, admin] = [await freePort(), await freePort()];
    const sidecar = await startChild(
      process.execPath,
      [CLI, 'serve', '--upstream-url', `http://127.0.0.1:${upPort}`, '--api-key', 'bench-key', '--listen', `127.0.0.1:${port}`, '--admin-listen', `127.0.0.1:${admin}`, '--log-level', 'warn'],
      `http://127.0.0.1:${admin}/readyz`,
    );
    stops.push(() => stopChild(sidecar));
    const base = `http://127.0.0.1:${port}`;

    // Cost: every item cached (ten configKeys of one customer), against one cached check.
    const single = JSON.stringify({ userReference: 'alice', configKey: 'k0' });
    const batch = JSON.stringify({ checks: Array.from({ length: ITEMS }, (_, i) => ({ userReference: 'alice', configKey: `k${i}` })) });
    await closedLoop({ url: `${base}${BATCH}`, body: batch }, 1, 1);
    const cost = await compare({
      name: `Batch of ${ITEMS} cached checks against one cached check (a batch should cost at most 3 single checks: ratio >= 0.33)`,
      baselineName: 'one cached check',
      subjectName: `batch of ${ITEMS} cached`,
      baseline: () => closedLoop({ url: `${base}${CHECK}`, body: single }, o.connections, o.durationS),
      subject: () => closedLoop({ url: `${base}${BATCH}`, body: batch }, o.connections, o.durationS),
      baselinePids: [sidecar.pid],
      subjectPids: [sidecar.pid],
      rounds: o.rounds,
      target: 1 / 3,
    });

    // Latency: one request at a time, every item a customer never asked before (a miss each).
    const perRun = 20_000;
    let run = 0;
    const misses = (batched: boolean) => () => {
      const tag = `${batched ? 'b' : 's'}${run++}`;
      const file = batched
        ? requestFile(dir, `${tag}.txt`, perRun, (n) => JSON.stringify({ checks: Array.from({ length: ITEMS }, (_, i) => ({ userReference: `${tag}-${n}-${i}`, configKey: 'k' })) }))
        : requestFile(dir, `${tag}.txt`, perRun, (n) => JSON.stringify({ userReference: `${tag}-${n}`, configKey: 'k' }));
      return closedLoop({ url: `${base}${batched ? BATCH : CHECK}`, requestFile: file }, 1, o.durationS);
    };
    const singles = [];
    const batches = [];
    for (let r = 0; r < o.rounds; r++) {
      singles.push(await misses(false)());
      batches.push(await misses(true)());
    }
    const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    return {
      cost,
      latency: {
        single: { p50: median(singles.map((x) => x.p50)), p99: median(singles.map((x) => x.p99)) },
        batch: { p50: median(batches.map((x) => x.p50)), p99: median(batches.map((x) => x.p99)) },
      },
    };
  } finally {
    for (const s of stops.reverse()) await s();
    rmSync(dir, { recursive: true, force: true });
  }
}

export function batchLines(b: BatchBench): string[] {
  const { single, batch } = b.latency;
  return [
    ...comparisonLines(b.cost),
    `  cost of one batch of ${ITEMS} cached, in single cached checks: ${fmt(1 / b.cost.ratio, 2)} (goal <= 3)`,
    `Batch of ${ITEMS} distinct misses against one miss, one request at a time (each item a customer never asked before; the service answers in ${SERVICE_DELAY_MS} ms):`,
    `  one miss p50 ${fmt(single.p50, 3)} ms p99 ${fmt(single.p99, 3)} ms; batch of ${ITEMS} misses p50 ${fmt(batch.p50, 3)} ms p99 ${fmt(batch.p99, 3)} ms; batch/one at p50 ${fmt(batch.p50 / single.p50, 2)} (goal <= 1.5)`,
  ];
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const b = await benchBatch({ rounds: Number(process.env.BENCH_ROUNDS ?? 3), durationS: Number(process.env.BENCH_DURATION_S ?? 3), connections: Number(process.env.BENCH_CONNECTIONS ?? 50) });
  if (b) console.log(batchLines(b).join('\n'));
  process.exit(0);
}
