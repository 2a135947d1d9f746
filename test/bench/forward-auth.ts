/**
 * Forward-auth cache hits against check cache hits, on the same sidecar in the same run: a proxy
 * asking `GET /sidecar/forward-auth?configKey=…` with the user in `x-user-reference`, against the
 * app's `POST /v1/authorization/check` with the JSON body, both answered from the ALLOW cache.
 * The sidecar (`node dist/cli.js serve`) runs in a child process and the load generator (autocannon)
 * in another (this file, role `load`), so neither shares an event loop with the other or with the
 * simulator here. Rounds alternate between the two routes to spread drift on a noisy machine.
 *
 * Alone: `npm run build && node --import tsx test/bench/forward-auth.ts` (BENCH_DURATION_S,
 * BENCH_CONNECTIONS, BENCH_FA_ROUNDS).
 */
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { startSimulator } from '../../src/simulator/index.js';
import { fmt, freePort, load, startChild, stopChild, type LoadResult } from './lib.js';

const SELF = fileURLToPath(import.meta.url);
const CLI = new URL('../../dist/cli.js', import.meta.url).pathname;
const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 8);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const ROUNDS = Number(process.env.BENCH_FA_ROUNDS ?? 2);
const CHECK = '/v1/authorization/check';
const USER = 'alice';
const KEY = 'marketing-email';

type LoadOptions = Parameters<typeof load>[0];

const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/**
 * CPU seconds (user + system) a process has used so far, from /proc (Linux), or NaN elsewhere.
 * CPU per request is far less sensitive than req/s to other work on a shared machine.
 */
function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
  } catch {
    return Number.NaN;
  }
}

/** One autocannon run in a process of its own; the result comes back as JSON on stdout. */
async function loadInChild(opts: LoadOptions): Promise<LoadResult> {
  const child = spawn(process.execPath, ['--import', 'tsx', SELF, 'load', JSON.stringify(opts)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  const code = await new Promise<number | null>((r) => child.once('exit', r));
  if (code !== 0) throw new Error(`load generator exited with ${code}`);
  return JSON.parse(out.trim().split('\n').pop()!) as LoadResult;
}

export interface ForwardAuthBench {
  check: LoadResult;
  forwardAuth: LoadResult;
  /** forward-auth req/s over check req/s, averaged over the rounds (target >= 0.95). */
  ratio: number;
  /** The ratio of each round (forward-auth over the check run next to it), to show the noise. */
  roundRatios: number[];
  /** The sidecar's CPU time per answered request (µs), all rounds (NaN without /proc). */
  cpuMicrosPerRequest: { check: number; forwardAuth: number };
}

export async function benchForwardAuth(): Promise<ForwardAuthBench> {
  const sim = await startSimulator({ port: 0, latencyMs: 2, decisionLifetimeMs: 3_600_000 });
  const [port, admin] = [await freePort(), await freePort()];
  const child = await startChild(
    process.execPath,
    [CLI, 'serve', '--upstream-url', sim.url, '--api-key', sim.apiKey, '--listen', `127.0.0.1:${port}`, '--admin-listen', `127.0.0.1:${admin}`, '--log-level', 'warn'],
    `http://127.0.0.1:${admin}/readyz`,
  );
  const base = `http://127.0.0.1:${port}`;
  try {
    const checkOpts: LoadOptions = { url: `${base}${CHECK}`, body: JSON.stringify({ userReference: USER, configKey: KEY }), connections: CONNECTIONS, durationS: 0 };
    const faOpts: LoadOptions = {
      url: `${base}/sidecar/forward-auth?configKey=${KEY}`,
      method: 'GET',
      headers: { 'x-user-reference': USER },
      connections: CONNECTIONS,
      durationS: 0,
    };
    // Warm the cache once through each route, and make sure each is the ALLOW being measured.
    const warm = await request(checkOpts.url, { method: 'POST', body: checkOpts.body, headers: { 'content-type': 'application/json' } });
    if (!(await warm.body.text()).includes('"ALLOW"')) throw new Error('warm-up check did not get an ALLOW');
    const fa = await request(faOpts.url, { headers: { 'x-user-reference': USER } });
    await fa.body.text();
    if (fa.statusCode !== 200 || fa.headers['x-consent-decision-source'] !== 'cache') throw new Error(`forward-auth warm-up: ${fa.statusCode} ${String(fa.headers['x-consent-decision-source'])}`);
    await loadInChild({ ...checkOpts, durationS: 2 });
    await loadInChild({ ...faOpts, durationS: 2 });

    const slice = Math.max(2, Math.round(DURATION_S / ROUNDS));
    const runs: { check: LoadResult[]; fa: LoadResult[] } = { check: [], fa: [] };
    const cpu = { check: 0, fa: 0 };
    for (let i = 0; i < ROUNDS; i++) {
      // Alternate which goes first so neither always follows the other's GC debt.
      const order = i % 2 === 0 ? (['check', 'fa'] as const) : (['fa', 'check'] as const);
      for (const which of order) {
        const before = cpuSeconds(child.pid!);
        runs[which].push(await loadInChild({ ...(which === 'check' ? checkOpts : faOpts), durationS: slice }));
        cpu[which] += cpuSeconds(child.pid!) - before;
      }
    }
    const sum = (rs: LoadResult[]): LoadResult => ({
      rps: rs.reduce((a, r) => a + r.rps, 0) / rs.length,
      p50: Math.max(...rs.map((r) => r.p50)),
      p99: Math.max(...rs.map((r) => r.p99)),
      non2xx: rs.reduce((a, r) => a + r.non2xx, 0),
      errors: rs.reduce((a, r) => a + r.errors, 0),
      total: rs.reduce((a, r) => a + r.total, 0),
    });
    const check = sum(runs.check);
    const forwardAuth = sum(runs.fa);
    const roundRatios = runs.fa.map((r, i) => r.rps / runs.check[i]!.rps);
    const cpuMicrosPerRequest = { check: (cpu.check * 1e6) / check.total, forwardAuth: (cpu.fa * 1e6) / forwardAuth.total };
    return { check, forwardAuth, ratio: forwardAuth.rps / check.rps, roundRatios, cpuMicrosPerRequest };
  } finally {
    await stopChild(child);
    await sim.close();
  }
}

export function forwardAuthLines(r: ForwardAuthBench): string[] {
  const line = (name: string, x: LoadResult): string =>
    `  ${name.padEnd(28)} ${fmt(x.rps).padStart(8)} req/s   p50 ${fmt(x.p50, 2)} ms   p99 ${fmt(x.p99, 2)} ms   (${fmt(x.total)} requests, ${x.non2xx} non-2xx, ${x.errors} errors)`;
  return [
    `Forward-auth vs check, cache hits on one sidecar (${CONNECTIONS} connections, ${ROUNDS} alternating rounds each, load generator in its own process)`,
    line('POST /v1/authorization/check', r.check),
    line('GET /sidecar/forward-auth', r.forwardAuth),
    `  throughput ratio forward-auth/check: ${fmt(r.ratio, 2)} (target >= 0.95); per round ${r.roundRatios.map((x) => fmt(x, 2)).join(', ')}`,
    `  sidecar CPU per request: check ${fmt(r.cpuMicrosPerRequest.check, 1)} µs, forward-auth ${fmt(r.cpuMicrosPerRequest.forwardAuth, 1)} µs`,
  ];
}

if (process.argv[2] === 'load') {
  const result = await load(JSON.parse(process.argv[3]!) as LoadOptions);
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exit(0);
} else if (process.argv[1] === SELF) {
  const r = await benchForwardAuth();
  for (const l of forwardAuthLines(r)) console.log(l);
  console.log(`JSON: ${JSON.stringify(r)}`);
  process.exit(0);
}
