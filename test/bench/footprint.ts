/**
 * What a pod pays for the sidecar: for a plain `serve`, one with Redis, one with tracing on, and a
 * bare node:http server on the same Node (required, not imported: see src/lib/node-http.ts), each
 * in a process of its own:
 * - start: from spawn to the first 200 of its readiness URL (median of FOOTPRINT_STARTS);
 * - idle RSS: VmRSS one second after it is ready (median of the starts);
 * - peak RSS: the highest VmRSS sampled during a 50-connection run of cache hits (wrk in its own
 *   process), and that peak over the idle figure;
 * - optimizing jobs before ready: with the image's node flags (no Maglev, TurboFan after 10,000
 *   calls) no optimizing compiler should run before a serve is ready, so neither compiler's code is
 *   paged in at idle. `--trace-opt` names every job V8 starts between spawn and a stop right after
 *   ready. How much runs in that window depends on the machine's load (a slow start polls and
 *   reconnects more), so this is measured here, not asserted by the suite; the suite holds the flags
 *   themselves to work (test/e2e/footprint-tiering.test.ts).
 *
 *   npx tsx test/bench/footprint.ts            (or BENCH_ONLY=footprint npm run bench)
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { IMAGE_NODE_FLAGS, IMAGE_NODE_OPTIONS } from '../helpers/image.js';
import { getTestRedis } from '../helpers/redis.js';
import { closedLoop, freePort, stopChild } from './lib.js';

const CLI = process.env.BENCH_CLI ?? fileURLToPath(new URL('../../dist/cli.js', import.meta.url));
const BARE = fileURLToPath(new URL('./bare-required.cjs', import.meta.url));
const BASELINES = fileURLToPath(new URL('./baselines.mjs', import.meta.url));
const OTLP_SINK = fileURLToPath(new URL('./otlp-sink.mjs', import.meta.url));
const STARTS = Number(process.env.FOOTPRINT_STARTS ?? 7);
const LOAD_S = Number(process.env.BENCH_DURATION_S ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const CHECK = '/v1/authorization/check';
const BODY = JSON.stringify({ userReference: 'alice', configKey: 'marketing-email' });

export interface Footprint {
  readonly name: string;
  readonly startMs: number;
  readonly idleMiB: number;
  readonly peakMiB: number;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const mib = (kb: number): number => kb / 1024;

function rssKb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : 0;
}

/** Spawns, then polls `readyUrl` until 200: the time from spawn to ready (ms), and the process. */
async function start(args: string[], readyUrl: string, env?: NodeJS.ProcessEnv): Promise<{ child: ChildProcess; ms: number }> {
  const t0 = performance.now();
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'inherit'], env: { PATH: process.env.PATH ?? '', ...env } });
  const deadline = t0 + 30_000;
  while (performance.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`${args.join(' ')} exited with ${child.exitCode}`);
    const ok = await fetch(readyUrl).then((r) => r.status === 200, () => false);
    if (ok) return { child, ms: performance.now() - t0 };
    await sleep(2);
  }
  child.kill('SIGKILL');
  throw new Error(`${readyUrl} never became ready`);
}

interface Subject {
  readonly name: string;
  /** The process's arguments and readiness URL for one start, with the URL its check goes to. */
  launch(): Promise<{ args: string[]; ready: string; target: string; env?: NodeJS.ProcessEnv }>;
}

async function measure(s: Subject): Promise<Footprint> {
  const starts: number[] = [];
  const idles: number[] = [];
  let last: { child: ChildProcess; target: string } | undefined;
  for (let i = 0; i < STARTS; i++) {
    const l = await s.launch();
    const { child, ms } = await start(l.args, l.ready, l.env);
    starts.push(ms);
    await sleep(1000); // settling after start: what the pod holds at idle, not a wait for a condition
    idles.push(rssKb(child.pid!));
    if (i < STARTS - 1) await stopChild(child);
    else last = { child, target: l.target };
  }
  // The last one under load: cache hits from 50 connections (the first request fills the cache).
  const { child, target } = last!;
  await fetch(target, { method: 'POST', body: BODY, headers: { 'content-type': 'application/json' } }).then((r) => r.text());
  let peak = rssKb(child.pid!);
  let loading = true;
  const sampler = (async () => {
    while (loading) {
      peak = Math.max(peak, rssKb(child.pid!));
      await sleep(50);
    }
  })();
  await closedLoop({ url: target, body: BODY }, CONNECTIONS, LOAD_S);
  loading = false;
  await sampler;
  await stopChild(child);
  return { name: s.name, startMs: median(starts), idleMiB: mib(median(idles)), peakMiB: mib(peak) };
}

/** The footprint rows: bare node:http, then the sidecar plain, with Redis, with tracing on. */
export async function benchFootprint(): Promise<Footprint[]> {
  const upPort = await freePort();
  const up = spawn(process.execPath, [BASELINES, 'upstream', String(upPort), String(Date.now() + 3_600_000)], { stdio: ['ignore', 'ignore', 'inherit'] });
  const sinkPort = await freePort();
  const sink = spawn(process.execPath, [OTLP_SINK, String(sinkPort)], { stdio: ['ignore', 'ignore', 'inherit'] });
  const redis = await getTestRedis();
  try {
    await sleep(500);
    /** `v8`: as the image runs node (its ENTRYPOINT's flags and NODE_OPTIONS), its NODE_OPTIONS alone, or V8's defaults. */
    const serve = (extra: string[], env: NodeJS.ProcessEnv = {}, v8: 'image' | 'node-options' | 'defaults' = 'image') => async () => {
      const [port, admin] = [await freePort(), await freePort()];
      const nodeFlags = v8 === 'image' ? IMAGE_NODE_FLAGS : [];
      const args = [...nodeFlags, CLI, 'serve', '--upstream-url', `http://127.0.0.1:${upPort}`, '--api-key', 'bench-key', '--listen', `127.0.0.1:${port}`, '--admin-listen', `127.0.0.1:${admin}`, '--log-level', 'warn', ...extra];
      return { args, ready: `http://127.0.0.1:${admin}/readyz`, target: `http://127.0.0.1:${port}${CHECK}`, env: { ...env, NODE_OPTIONS: v8 === 'defaults' ? '' : IMAGE_NODE_OPTIONS } };
    };
    const tracing = { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${sinkPort}`, OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.01' };
    const redisFlags = ['--redis-url', redis.url, '--redis-key-prefix', redis.prefix()];
    const subjects: Subject[] = [
      {
        name: 'bare node:http',
        launch: async () => {
          const port = await freePort();
          return { args: [BARE, String(port)], ready: `http://127.0.0.1:${port}/ready`, target: `http://127.0.0.1:${port}${CHECK}` };
        },
      },
      { name: 'serve', launch: serve([]) },
      { name: 'serve, Redis', launch: serve(redisFlags) },
      { name: 'serve, tracing', launch: serve([], tracing) },
      { name: 'serve, Redis and tracing', launch: serve(redisFlags, tracing) },
      // What the ENTRYPOINT's flags buy (node's tiering), then what the NODE_OPTIONS buy, against V8's defaults.
      { name: 'serve, NODE_OPTIONS only', launch: serve([], {}, 'node-options') },
      { name: 'serve, Redis and tracing, NODE_OPTIONS only', launch: serve(redisFlags, tracing, 'node-options') },
      { name: 'serve, V8 defaults', launch: serve([], {}, 'defaults') },
      { name: 'serve, Redis, V8 defaults', launch: serve(redisFlags, {}, 'defaults') },
    ];
    const rows: Footprint[] = [];
    for (const s of subjects) rows.push(await measure(s));
    return rows;
  } finally {
    up.kill('SIGTERM');
    sink.kill('SIGTERM');
    await redis.stop();
  }
}

/** The optimizing jobs V8 started in one serve (image flags and `--trace-opt`) from spawn to a stop right after ready. */
async function jobsBeforeReady(args: string[], readyUrl: string, env: NodeJS.ProcessEnv): Promise<string[]> {
  const t0 = performance.now();
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'], env: { PATH: process.env.PATH ?? '', ...env } });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise((r) => child.once('exit', r));
  while (!(await fetch(readyUrl).then((r) => r.status === 200, () => false))) {
    if (child.exitCode !== null || performance.now() - t0 > 30_000) throw new Error(`${readyUrl} never became ready`);
    await sleep(2);
  }
  await stopChild(child);
  await exited;
  return out.split('\n').filter((l) => l.startsWith('[compiling method')).map((l) => /JSFunction (\S+)/.exec(l)?.[1] ?? l);
}

export interface TieringRow {
  readonly name: string;
  /** Functions V8 optimized before ready, in each of {@link STARTS} starts. */
  readonly jobs: readonly (readonly string[])[];
}

/** Optimizing jobs before ready, for a plain serve and one with Redis and tracing, as the image runs node. */
export async function benchTiering(): Promise<TieringRow[]> {
  const upPort = await freePort();
  const up = spawn(process.execPath, [BASELINES, 'upstream', String(upPort), String(Date.now() + 3_600_000)], { stdio: ['ignore', 'ignore', 'inherit'] });
  const redis = await getTestRedis();
  try {
    const rows: TieringRow[] = [];
    for (const [name, extra, env] of [
      ['serve', [], {}],
      ['serve, Redis and tracing', ['--redis-url', redis.url, '--redis-key-prefix', redis.prefix()], { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' }],
    ] as const) {
      const jobs: string[][] = [];
      for (let i = 0; i < STARTS; i++) {
        const [port, admin] = [await freePort(), await freePort()];
        const args = [...IMAGE_NODE_FLAGS, '--trace-opt', CLI, 'serve', '--upstream-url', `http://127.0.0.1:${upPort}`, '--api-key', 'bench-key', '--listen', `127.0.0.1:${port}`, '--admin-listen', `127.0.0.1:${admin}`, ...extra];
        jobs.push(await jobsBeforeReady(args, `http://127.0.0.1:${admin}/readyz`, { ...env, NODE_OPTIONS: IMAGE_NODE_OPTIONS }));
      }
      rows.push({ name, jobs });
    }
    return rows;
  } finally {
    up.kill('SIGTERM');
    await redis.stop();
  }
}

export function tieringLines(rows: readonly TieringRow[]): string[] {
  const lines = [`Optimizing jobs before ready (image's node flags, --trace-opt; ${STARTS} starts each; 0 expected):`];
  for (const r of rows) {
    const names = [...new Set(r.jobs.flat())];
    lines.push(`  ${r.name}: ${r.jobs.map((j) => j.length).join(' ')}${names.length > 0 ? `   (${names.join(', ')})` : ''}`);
  }
  return lines;
}

export function footprintLines(rows: readonly Footprint[]): string[] {
  const bare = rows.find((r) => r.name === 'bare node:http')!;
  const lines = [`Footprint (Node ${process.version}; serve as the image runs node: ${[...IMAGE_NODE_FLAGS, `NODE_OPTIONS=${IMAGE_NODE_OPTIONS || '(none)'}`].join(' ')}; median of ${STARTS} starts; peak under ${CONNECTIONS} connections of cache hits for ${LOAD_S} s):`];
  const width = Math.max(...rows.map((r) => r.name.length));
  for (const r of rows) {
    lines.push(
      `  ${r.name.padEnd(width)} ready ${r.startMs.toFixed(0).padStart(4)} ms   idle ${r.idleMiB.toFixed(1).padStart(6)} MiB (${(r.idleMiB / bare.idleMiB).toFixed(2)}× bare)   peak ${r.peakMiB.toFixed(1).padStart(6)} MiB (${(r.peakMiB / r.idleMiB).toFixed(2)}× its idle)`,
    );
  }
  return lines;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  console.log(footprintLines(await benchFootprint()).join('\n'));
  console.log(tieringLines(await benchTiering()).join('\n'));
}
