/**
 * gRPC ext_authz cache hits (`BENCH_ONLY=grpc`): the sidecar's `Authorization/Check` against a
 * bare grpc-js server answering one fixed OK on the same .proto files (grpc-bare.mjs), and against
 * the sidecar's own HTTP forward-auth on the same cached key. Every server and each load generator
 * (grpc-gen.ts for gRPC; lib.ts closedLoop, wrk or autocannon, for HTTP) run in processes of their
 * own; the rounds alternate through lib.ts compare().
 *
 * Alone: `npm run build && node --import tsx test/bench/grpc.ts` (BENCH_DURATION_S,
 * BENCH_CONNECTIONS, BENCH_ROUNDS, BENCH_GRPC_CHANNELS).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { CheckRequestType } from '../helpers/grpc.js';
import { closedLoop, compare, comparisonLines, freePort, runToEnd, startChild, stopChild, type Comparison, type LoadResult } from './lib.js';

const SELF = fileURLToPath(import.meta.url);
const CLI = process.env.BENCH_CLI ?? new URL('../../dist/cli.js', import.meta.url).pathname;
const BASELINES = new URL('./baselines.mjs', import.meta.url).pathname;
const BARE = new URL('./grpc-bare.mjs', import.meta.url).pathname;
const GEN = new URL('./grpc-gen.ts', import.meta.url).pathname;
const USER = 'alice';
const KEY = 'marketing-email';
const CHANNELS = Number(process.env.BENCH_GRPC_CHANNELS ?? 2);

/** What Envoy sends for a plain GET: a few headers, the route's configKey in context_extensions. */
const REQUEST = Buffer.from(
  CheckRequestType()
    .encode({
      attributes: {
        source: { principal: 'spiffe://cluster.local/ns/shop/sa/frontend' },
        request: { http: { id: 'b3f1c2', method: 'GET', path: '/newsletter/subscribe', host: 'shop.example.com', scheme: 'https', protocol: 'HTTP/2', headers: { ':authority': 'shop.example.com', ':method': 'GET', ':path': '/newsletter/subscribe', accept: '*/*', 'user-agent': 'curl/8.5.0', 'x-request-id': 'b3f1c2', 'x-user-reference': USER } } },
        context_extensions: { configKey: KEY },
      },
    })
    .finish(),
).toString('base64');

/** A grpc server process ready once it prints "ready". */
function startPrinting(args: string[]): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    child.stdout!.on('data', (c: Buffer) => {
      if (c.toString().includes('ready')) resolve(child);
    });
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited with ${code}`)));
  });
}

async function grpcLoad(target: string, inFlight: number, durationS: number): Promise<LoadResult> {
  const out = await runToEnd(process.execPath, ['--import', 'tsx', GEN, JSON.stringify({ target, request: REQUEST, channels: CHANNELS, inFlight, durationS })]);
  return JSON.parse(out.trim().split('\n').pop()!) as LoadResult;
}

export async function benchGrpc(o: { rounds: number; durationS: number; connections: number }): Promise<Comparison[]> {
  const stop: ChildProcess[] = [];
  try {
    const upPort = await freePort();
    stop.push(await startChild(process.execPath, [BASELINES, 'upstream', String(upPort), String(Date.now() + 3_600_000)], `http://127.0.0.1:${upPort}/ready`));
    const [port, admin, grpcPort, barePort] = [await freePort(), await freePort(), await freePort(), await freePort()];
    const sidecar = await startChild(
      process.execPath,
      [CLI, 'serve', '--upstream-url', `http://127.0.0.1:${upPort}`, '--api-key', 'bench-key', '--listen', `127.0.0.1:${port}`, '--admin-listen', `127.0.0.1:${admin}`, '--grpc-listen', `127.0.0.1:${grpcPort}`, '--log-level', 'warn'],
      `http://127.0.0.1:${admin}/readyz`,
    );
    stop.push(sidecar);
    const bare = await startPrinting([BARE, String(barePort)]);
    stop.push(bare);
    const forwardAuth = { url: `http://127.0.0.1:${port}/sidecar/forward-auth?configKey=${KEY}`, method: 'GET' as const, headers: { 'x-user-reference': USER } };
    // Warm the cache through forward-auth; the gRPC calls then hit the same entry.
    const warm = await request(forwardAuth.url, { headers: forwardAuth.headers });
    await warm.body.text();
    if (warm.statusCode !== 200) throw new Error(`forward-auth warm-up: ${warm.statusCode}`);
    const grpcTarget = `127.0.0.1:${grpcPort}`;
    for (const target of [grpcTarget, `127.0.0.1:${barePort}`]) {
      const w = await grpcLoad(target, o.connections, 1);
      if (w.errors + w.non2xx > 0 || w.total === 0) throw new Error(`gRPC warm-up against ${target === grpcTarget ? 'the sidecar' : 'the bare server'}: ${JSON.stringify(w)}`);
    }
    await closedLoop(forwardAuth, o.connections, 1);
    const vsBare = await compare({
      name: 'gRPC ext_authz cache hit: sidecar vs bare grpc-js answering a fixed OK (same proto)',
      baselineName: 'bare grpc-js server',
      subjectName: 'sidecar Authorization/Check',
      baseline: () => grpcLoad(`127.0.0.1:${barePort}`, o.connections, o.durationS),
      subject: () => grpcLoad(grpcTarget, o.connections, o.durationS),
      baselinePids: [bare.pid],
      subjectPids: [sidecar.pid],
      rounds: o.rounds,
      target: 0.8,
    });
    const vsForwardAuth = await compare({
      name: 'gRPC ext_authz vs HTTP forward-auth, the same cached key on one sidecar',
      baselineName: 'GET /sidecar/forward-auth',
      subjectName: 'gRPC Authorization/Check',
      baseline: () => closedLoop(forwardAuth, o.connections, o.durationS),
      subject: () => grpcLoad(grpcTarget, o.connections, o.durationS),
      baselinePids: [sidecar.pid],
      subjectPids: [sidecar.pid],
      rounds: o.rounds,
    });
    return [vsBare, vsForwardAuth];
  } finally {
    for (const c of stop.reverse()) await stopChild(c);
  }
}

if (process.argv[1] === SELF) {
  const cs = await benchGrpc({
    rounds: Number(process.env.BENCH_ROUNDS ?? 3),
    durationS: Number(process.env.BENCH_DURATION_S ?? 3),
    connections: Number(process.env.BENCH_CONNECTIONS ?? 50),
  });
  for (const c of cs) console.log(`${comparisonLines(c).join('\n')}\n`);
  process.exit(0);
}
