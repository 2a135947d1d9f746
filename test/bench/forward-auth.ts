/**
 * Forward-auth cache hits against check cache hits, on the same sidecar in the same run: a proxy
 * asking `GET /sidecar/forward-auth?configKey=…` with the user in `x-user-reference`, against the
 * app's `POST /v1/authorization/check` with the JSON body, both answered from the ALLOW cache.
 * The sidecar (`serve`, or BENCH_CLI's), the upstream (baselines.mjs) and the load generator
 * (lib.ts closedLoop: wrk, else autocannon) each run in a process of their own; the rounds
 * alternate through lib.ts compare(), so the "baseline" here is the check route.
 *
 * Alone: `npm run build && node --import tsx test/bench/forward-auth.ts` (BENCH_DURATION_S,
 * BENCH_CONNECTIONS, BENCH_ROUNDS).
 */
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { closedLoop, compare, comparisonLines, freePort, startChild, stopChild, type Comparison } from './lib.js';

const SELF = fileURLToPath(import.meta.url);
const CLI = process.env.BENCH_CLI ?? new URL('../../dist/cli.js', import.meta.url).pathname;
const BASELINES = new URL('./baselines.mjs', import.meta.url).pathname;
const CHECK = '/v1/authorization/check';
const USER = 'alice';
const KEY = 'marketing-email';

export async function benchForwardAuth(o: { rounds: number; durationS: number; connections: number }): Promise<Comparison> {
  const upPort = await freePort();
  const up = await startChild(process.execPath, [BASELINES, 'upstream', String(upPort), String(Date.now() + 3_600_000)], `http://127.0.0.1:${upPort}/ready`);
  const [port, admin] = [await freePort(), await freePort()];
  const sidecar = await startChild(
    process.execPath,
    [CLI, 'serve', '--upstream-url', `http://127.0.0.1:${upPort}`, '--api-key', 'bench-key', '--listen', `127.0.0.1:${port}`, '--admin-listen', `127.0.0.1:${admin}`, '--log-level', 'warn'],
    `http://127.0.0.1:${admin}/readyz`,
  ).catch(async (err: unknown) => {
    await stopChild(up);
    throw err;
  });
  const base = `http://127.0.0.1:${port}`;
  try {
    const check = { url: `${base}${CHECK}`, body: JSON.stringify({ userReference: USER, configKey: KEY }) };
    const forwardAuth = { url: `${base}/sidecar/forward-auth?configKey=${KEY}`, method: 'GET' as const, headers: { 'x-user-reference': USER } };
    // Warm the cache once through each route, and make sure each is the ALLOW being measured.
    const warm = await request(check.url, { method: 'POST', body: check.body, headers: { 'content-type': 'application/json' } });
    if (!(await warm.body.text()).includes('"ALLOW"')) throw new Error('warm-up check did not get an ALLOW');
    const fa = await request(forwardAuth.url, { headers: forwardAuth.headers });
    await fa.body.text();
    if (fa.statusCode !== 200 || fa.headers['x-consent-decision-source'] !== 'cache') throw new Error(`forward-auth warm-up: ${fa.statusCode} ${String(fa.headers['x-consent-decision-source'])}`);
    await closedLoop(check, o.connections, 2);
    await closedLoop(forwardAuth, o.connections, 2);
    return await compare({
      name: 'Forward-auth vs check, cache hits on one sidecar',
      baselineName: 'POST /v1/authorization/check',
      subjectName: 'GET /sidecar/forward-auth',
      baseline: () => closedLoop(check, o.connections, o.durationS),
      subject: () => closedLoop(forwardAuth, o.connections, o.durationS),
      baselinePids: [sidecar.pid],
      subjectPids: [sidecar.pid],
      rounds: o.rounds,
      target: 0.95,
    });
  } finally {
    await stopChild(sidecar);
    await stopChild(up);
  }
}

if (process.argv[1] === SELF) {
  const c = await benchForwardAuth({
    rounds: Number(process.env.BENCH_ROUNDS ?? 3),
    durationS: Number(process.env.BENCH_DURATION_S ?? 3),
    connections: Number(process.env.BENCH_CONNECTIONS ?? 50),
  });
  console.log(comparisonLines(c).join('\n'));
  process.exit(0);
}
