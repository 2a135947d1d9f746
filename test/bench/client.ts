/**
 * What a check costs the application through @consent-sidecar/client (node's own http, no
 * dependencies) against the client it replaced (undici's Pool, as consent-sidecar/client was before
 * the package). Each client runs in a process of its own, both at once in every round (so whatever
 * else the machine does weighs on both alike), pinned to one core where taskset exists, against the
 * same real `serve` (cache hits) pinned to the other: checks a second and each client process's CPU
 * per check (process.cpuUsage, user + system), the ratio taken per round. The earlier client is built
 * from git (BEFORE_REVISION, its src/client with undici bundled in), or taken from
 * BENCH_CLIENT_BEFORE (an ES module exporting ConsentClient).
 *
 * Alone: `npm run build && node --import tsx test/bench/client.ts` (BENCH_ROUNDS, BENCH_DURATION_S).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { comparisonLines, fmt, freePort, runToEnd, startChild, stopChild, type Comparison } from './lib.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CLI = process.env.BENCH_CLI ?? join(ROOT, 'dist/cli.js');
const BASELINES = fileURLToPath(new URL('./baselines.mjs', import.meta.url));
const LOAD = fileURLToPath(new URL('./client-load.mjs', import.meta.url));
/** The last commit whose client ran on undici (main, before @consent-sidecar/client). */
const BEFORE_REVISION = '2b5595d7cc15dddb976c923d99356bb4d650902a';
const TASKSET = ['/usr/bin/taskset', '/bin/taskset'].find((p) => existsSync(p)) ?? null;
const BEFORE_FILES = ['src/client/index.ts', 'src/client/consent-client.ts', 'src/client/read-answer.ts', 'src/client/types.ts', 'src/lib/duplicate-member.ts'];

interface Run {
  done: number;
  bad: number;
  elapsedS: number;
  cpuUs: number;
  p50: number;
  p99: number;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? Number.NaN;

/** The client before the package, from git, bundled with undici into one ES module in `dir`; null without git. */
async function clientBefore(dir: string): Promise<string | null> {
  if (process.env.BENCH_CLIENT_BEFORE) return process.env.BENCH_CLIENT_BEFORE;
  for (const file of BEFORE_FILES) {
    const shown = spawnSync('git', ['show', `${BEFORE_REVISION}:${file}`], { cwd: ROOT, encoding: 'utf8' });
    if (shown.status !== 0) return null;
    mkdirSync(join(dir, file, '..'), { recursive: true });
    writeFileSync(join(dir, file), shown.stdout);
  }
  const out = join(dir, 'client-before.mjs');
  await build({
    entryPoints: [join(dir, 'src/client/index.ts')],
    outfile: out,
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node22',
    nodePaths: [join(ROOT, 'node_modules')],
    // undici is CommonJS: its requires of node's built-ins need a require in the ES module.
    banner: { js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" },
    logLevel: 'warning',
  });
  return out;
}

export async function benchClient(o: { rounds: number; durationS: number; concurrency: number }): Promise<Comparison | null> {
  const dir = mkdtempSync(join(os.tmpdir(), 'bench-client-'));
  const stops: (() => Promise<void>)[] = [];
  try {
    const before = await clientBefore(dir);
    if (!before) {
      console.log(`Client: skipped, no git history to build the earlier client from (set BENCH_CLIENT_BEFORE)\n`);
      return null;
    }
    const built = spawnSync(process.execPath, [join(ROOT, 'scripts/build-client.mjs')], { cwd: ROOT, encoding: 'utf8' });
    if (built.status !== 0) throw new Error(`scripts/build-client.mjs failed:\n${built.stdout}${built.stderr}`);
    const packaged = join(ROOT, 'packages/client/dist/index.js');

    // Two cores or more: the sidecar and the service on the first, both clients on the last.
    const cores = os.availableParallelism();
    const pin = (core: number, argv: string[]): [string, string[]] => (TASKSET && cores > 1 ? [TASKSET, ['-c', String(core), ...argv]] : [argv[0]!, argv.slice(1)]);
    const upPort = await freePort();
    const up = await startChild(...pin(0, [process.execPath, BASELINES, 'upstream', String(upPort), String(Date.now() + 3_600_000)]), `http://127.0.0.1:${upPort}/ready`);
    stops.push(() => stopChild(up));
    const [port, admin] = [await freePort(), await freePort()];
    const sidecar = await startChild(
      ...pin(0, [process.execPath, CLI, 'serve', '--upstream-url', `http://127.0.0.1:${upPort}`, '--api-key', 'bench-key', '--listen', `127.0.0.1:${port}`, '--admin-listen', `127.0.0.1:${admin}`, '--log-level', 'warn']),
      `http://127.0.0.1:${admin}/readyz`,
    );
    stops.push(() => stopChild(sidecar));
    const base = `http://127.0.0.1:${port}`;
    const run = async (module: string): Promise<Run> =>
      JSON.parse((await runToEnd(...pin(cores - 1, [process.execPath, LOAD, module, base, String(o.concurrency), String(o.durationS)]))).trim().split('\n').pop()!) as Run;

    const rounds: { b: Run; s: Run }[] = [];
    for (let r = 0; r < o.rounds; r++) {
      const [b, s] = await Promise.all([run(before), run(packaged)]);
      rounds.push({ b, s });
    }
    const cpuPerCheck = (x: Run): number => x.cpuUs / Math.max(1, x.done);
    const side = (pick: (x: { b: Run; s: Run }) => Run) => ({
      rps: median(rounds.map((x) => pick(x).done / pick(x).elapsedS)),
      p50: median(rounds.map((x) => pick(x).p50)),
      p99: median(rounds.map((x) => pick(x).p99)),
      cpuUsPerRequest: median(rounds.map((x) => cpuPerCheck(pick(x)))),
    });
    const roundRatios = rounds.map((x) => x.s.done / x.s.elapsedS / (x.b.done / x.b.elapsedS));
    return {
      name: `A check through the client (cache hit, ${o.concurrency} in flight, both clients at once${TASKSET && cores > 1 ? ' on one core' : ''}): @consent-sidecar/client vs the client before it (undici)`,
      baselineName: 'client before (undici Pool)',
      subjectName: '@consent-sidecar/client (node:http)',
      ratio: median(roundRatios),
      roundRatios,
      // Per round, then the median: both ran at once, so a round's ratio is what the machine did not disturb.
      cpuRatio: median(rounds.map((x) => cpuPerCheck(x.b) / cpuPerCheck(x.s))),
      baseline: side((x) => x.b),
      subject: side((x) => x.s),
      bad: rounds.reduce((a, x) => a + x.b.bad + x.s.bad, 0),
    };
  } finally {
    for (const stop of stops.reverse()) await stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const c = await benchClient({ rounds: Number(process.env.BENCH_ROUNDS ?? 5), durationS: Number(process.env.BENCH_DURATION_S ?? 3), concurrency: Number(process.env.BENCH_CLIENT_CONCURRENCY ?? 16) });
  if (c) console.log(`${comparisonLines(c).join('\n')}\n  (CPU is the client process's, per check, medians: ${fmt(c.baseline.cpuUsPerRequest, 1)} → ${fmt(c.subject.cpuUsPerRequest, 1)} µs; per-round CPU ratios median ${fmt(c.cpuRatio, 2)})`);
}
