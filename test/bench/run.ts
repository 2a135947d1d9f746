/**
 * `npm run bench`: every figure is a ratio against its baseline measured in the same run, in
 * alternating rounds (B S, S B, ...), with the same load settings. The load generator (wrk where
 * it is installed, else autocannon) and every server (the sidecar, each baseline, the upstream,
 * the app, nginx) run in processes of their own; this process only starts them and counts (but
 * for coalescing, a count, and webhook-queue's receipt-timing app, the same for both modes). Each
 * row also gives the servers' CPU time per request (from /proc), which a busy neighbour disturbs
 * far less than req/s. Results are printed and written to BENCH_JSON (default bench-results.json).
 *
 * Environment: BENCH_DURATION_S (seconds per run, default 3), BENCH_ROUNDS (3),
 * BENCH_CONNECTIONS (50), BENCH_RATE (fixed-rate figure, 2000 req/s), BENCH_CACHE_ENTRIES
 * (1000000), BENCH_REFRESH_S (the refresh-ahead run, 30 s each), BENCH_ONLY (comma-separated
 * section names: decision, webhooks, cache-scale, coalescing, refresh-ahead, forward-auth,
 * webhook-queue, tracing, grpc, batch, footprint, client, fleet; or as arguments: `npm run bench -- fleet`),
 * BENCH_GENERATOR=autocannon, BENCH_TRACING_BEFORE_CLI (the tracing section: a
 * dist/cli.js built before issue 24, for "off" against it), BENCH_CLIENT_BEFORE (the client section: the client to compare
 * @consent-sidecar/client with, an ES module; by default the undici one, built from git).
 *
 * Sections are a list (SECTIONS below): a new bench adds one entry and one function.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { startNginx } from '../helpers/nginx.js';
import { batchLines, benchBatch } from './batch.js';
import { benchClient } from './client.js';
import { benchFleet, fleetLines } from './fleet.js';
import { benchFootprint, benchTiering, footprintLines, tieringLines } from './footprint.js';
import { benchForwardAuth } from './forward-auth.js';
import { benchGrpc } from './grpc.js';
import {
  closedLoop,
  compare,
  comparisonLines,
  fmt,
  freePort,
  machineLine,
  rawLoad,
  startChild,
  stopChild,
  type Comparison,
  type RateResult,
} from './lib.js';
import { benchCacheAtScale, cacheScaleLines } from './cache-scale.js';
import { benchCoalescing } from './coalescing.js';
import { benchRefreshAhead, refreshLines } from './refresh-ahead.js';
import { benchTracing } from './tracing.js';
import { benchWebhooks } from './webhooks.js';
import { benchWebhookQueue, queueBenchLines } from './webhook-queue.js';

const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const RATE = Number(process.env.BENCH_RATE ?? 2000);
const CLI = process.env.BENCH_CLI ?? new URL('../../dist/cli.js', import.meta.url).pathname;
const BARE = new URL('./bare-required.cjs', import.meta.url).pathname;
const BASELINES = new URL('./baselines.mjs', import.meta.url).pathname;
const CHECK = '/v1/authorization/check';
const API_KEY = 'bench-key';
const ALLOW_BODY = JSON.stringify({ userReference: 'alice', configKey: 'marketing-email' });

const results: Record<string, unknown> = {};
const comparisons: Comparison[] = [];

function report(c: Comparison): void {
  comparisons.push(c);
  console.log(`${comparisonLines(c).join('\n')}\n`);
}

/** A baseline server of baselines.mjs in its own process. */
async function baseline(role: string, ...args: string[]) {
  const port = await freePort();
  const child = await startChild(process.execPath, [BASELINES, role, String(port), ...args], `http://127.0.0.1:${port}/ready`);
  return { child, port, url: `http://127.0.0.1:${port}` };
}

/** `node dist/cli.js serve` in its own process. */
/** A sidecar on a TCP port, or on `listen` (a `unix:` path) when given: serve takes --listen once. */
async function sidecar(upstreamUrl: string, extra: string[] = [], env?: NodeJS.ProcessEnv, listen?: string) {
  const [port, admin] = [await freePort(), await freePort()];
  const child = await startChild(
    process.execPath,
    [CLI, 'serve', '--upstream-url', upstreamUrl, '--api-key', API_KEY, '--listen', listen ?? `127.0.0.1:${port}`, '--admin-listen', `127.0.0.1:${admin}`, '--log-level', 'warn', ...extra],
    `http://127.0.0.1:${admin}/readyz`,
    env,
  );
  return { child, port, url: `http://127.0.0.1:${port}`, admin: `http://127.0.0.1:${admin}` };
}

function rateLine(name: string, r: RateResult): string {
  return `  ${name.padEnd(34)} ${fmt(r.achievedRps).padStart(8)} req/s   p50 ${fmt(r.p50, 3)} ms   p99 ${fmt(r.p99, 3)} ms   p99.9 ${fmt(r.p999, 3)} ms   max ${fmt(r.max, 1)} ms   (${r.non2xx} non-2xx, ${r.errors} errors)`;
}

// --- decision API: cache hits, misses, nginx, the Unix socket --------------------------------
async function decisionSection(): Promise<void> {
  const up = await baseline('upstream', String(Date.now() + 3_600_000));
  const upstreamUrl = `${up.url}`;
  const cleanup: (() => Promise<void>)[] = [() => stopChild(up.child)];
  const started = { push: (c: import('node:child_process').ChildProcess) => cleanup.push(() => stopChild(c)) };
  const dir = mkdtempSync(join(tmpdir(), 'bench-sock-'));
  try {
    const s = await sidecar(upstreamUrl);
    started.push(s.child);
    const warm = await request(`${s.url}${CHECK}`, { method: 'POST', body: ALLOW_BODY, headers: { 'content-type': 'application/json' } });
    const warmBody = await warm.body.text();
    if (!warmBody.includes('"ALLOW"')) throw new Error(`warm-up did not get an ALLOW: ${warmBody}`);
    const barePort = await freePort();
    const bare = await startChild(process.execPath, [BARE, String(barePort), warmBody], `http://127.0.0.1:${barePort}/ready`);
    started.push(bare);
    const fwd = await baseline('forwarder', `${up.url}${CHECK}`, API_KEY);
    started.push(fwd.child);

    // nginx: proxy_cache keyed by the body (cache hits) and proxy_pass (misses), one worker.
    const nginxPort = await freePort();
    const nginx = await startNginx(
      [
        `proxy_cache_path ${dir}/nginx-cache keys_zone=bench:10m;`,
        'upstream service { server 127.0.0.1:' + up.port + '; keepalive 64; }',
        'server {',
        `  listen 127.0.0.1:${nginxPort};`,
        '  client_body_buffer_size 16k;',
        '  location = /cached {',
        '    proxy_pass http://service' + CHECK + ';',
        '    proxy_http_version 1.1; proxy_set_header Connection "";',
        `    proxy_set_header Authorization "Bearer ${API_KEY}";`,
        '    proxy_cache bench; proxy_cache_methods POST; proxy_cache_key $request_body; proxy_cache_valid 200 1h;',
        '    proxy_ignore_headers Cache-Control Expires Set-Cookie;',
        '  }',
        '  location = /pass {',
        '    proxy_pass http://service' + CHECK + ';',
        '    proxy_http_version 1.1; proxy_set_header Connection "";',
        `    proxy_set_header Authorization "Bearer ${API_KEY}";`,
        '  }',
        '}',
      ].join('\n'),
      nginxPort,
    ).catch((err: Error) => {
      console.log(`  (nginx rows skipped: ${err.message.split('\n')[0]})`);
      return null;
    });
    if (nginx) cleanup.push(() => nginx.close());

    const hit = { url: `${s.url}${CHECK}`, body: ALLOW_BODY };
    const noCache = { ...hit, headers: { 'cache-control': 'no-cache' } };
    const run = (t: Parameters<typeof closedLoop>[0]) => () => closedLoop(t, CONNECTIONS, DURATION_S);
    // warm every target once
    for (const t of [hit, noCache, { url: `http://127.0.0.1:${barePort}${CHECK}`, body: ALLOW_BODY }, { url: `${fwd.url}${CHECK}`, body: ALLOW_BODY }]) await closedLoop(t, CONNECTIONS, 2);

    report(
      await compare({
        name: 'Cache hit: sidecar vs bare node:http answering a fixed JSON',
        baselineName: 'bare node:http',
        subjectName: 'sidecar cache hit',
        baseline: run({ url: `http://127.0.0.1:${barePort}${CHECK}`, body: ALLOW_BODY }),
        subject: run(hit),
        baselinePids: [bare.pid],
        subjectPids: [s.child.pid],
        rounds: ROUNDS,
        // Issue 23's targets, printed beside the ratio they apply to.
        target: 0.9,
      }),
    );
    if (nginx) {
      await closedLoop({ url: `${nginx.url}/cached`, body: ALLOW_BODY }, CONNECTIONS, 1);
      report(
        await compare({
          name: 'Cache hit: sidecar vs nginx proxy_cache keyed by the body (one worker)',
          baselineName: 'nginx proxy_cache',
          subjectName: 'sidecar cache hit',
          baseline: run({ url: `${nginx.url}/cached`, body: ALLOW_BODY }),
          subject: run(hit),
          baselinePids: [nginx.pid],
          subjectPids: [s.child.pid],
          rounds: ROUNDS,
        }),
      );
    }

    // Fixed rate, open loop, generator in its own process: latency from each request's due time.
    const bareRate = await rawLoad({ url: `http://127.0.0.1:${barePort}${CHECK}`, bodies: [ALLOW_BODY], rate: RATE, durationS: DURATION_S, connections: CONNECTIONS });
    const hitRate = await rawLoad({ url: hit.url, bodies: [ALLOW_BODY], rate: RATE, durationS: DURATION_S, connections: CONNECTIONS });
    console.log(`Cache hit at a fixed ${RATE} req/s (open loop in its own process, latency from each request's due time)`);
    console.log(rateLine('bare node:http', bareRate));
    console.log(rateLine('sidecar cache hit', hitRate));
    console.log(`  p99 ratio sidecar/bare ${fmt(hitRate.p99 / bareRate.p99, 2)}\n`);
    results.cacheHitFixedRate = { rate: RATE, bare: bareRate, sidecar: hitRate };

    // Misses: Cache-Control: no-cache sends every check to the upstream.
    report(
      await compare({
        name: 'Miss (no-cache): sidecar vs calling the service directly',
        baselineName: 'service directly',
        subjectName: 'sidecar miss',
        baseline: run({ url: `${up.url}${CHECK}`, body: ALLOW_BODY, headers: { authorization: `Bearer ${API_KEY}` } }),
        subject: run(noCache),
        baselinePids: [up.child.pid],
        subjectPids: [s.child.pid, up.child.pid],
        rounds: ROUNDS,
      }),
    );
    report(
      await compare({
        name: 'Miss (no-cache): sidecar vs a minimal node + undici forwarder',
        baselineName: 'node + undici forwarder',
        subjectName: 'sidecar miss',
        baseline: run({ url: `${fwd.url}${CHECK}`, body: ALLOW_BODY }),
        subject: run(noCache),
        baselinePids: [fwd.child.pid],
        subjectPids: [s.child.pid],
        rounds: ROUNDS,
        target: 1.0,
      }),
    );
    if (nginx) {
      report(
        await compare({
          name: 'Miss (no-cache): sidecar vs nginx proxy_pass (one worker)',
          baselineName: 'nginx proxy_pass',
          subjectName: 'sidecar miss',
          baseline: run({ url: `${nginx.url}/pass`, body: ALLOW_BODY }),
          subject: run(noCache),
          baselinePids: [nginx.pid],
          subjectPids: [s.child.pid],
          rounds: ROUNDS,
        }),
      );
    }

    // The decision API on a Unix socket vs loopback TCP: two sidecars, our raw generator (wrk has
    // no Unix sockets), closed loop, then open loop at a fixed rate.
    const sock = join(dir, 'decision.sock');
    const u = await sidecar(upstreamUrl, [], undefined, `unix:${sock}`).catch((err: Error) => {
      console.log(`  (Unix socket row skipped: ${err.message.split('\n')[0]})\n`);
      return null;
    });
    if (u) {
      started.push(u.child);
      const viaSock = { url: `http://localhost${CHECK}`, socketPath: sock, bodies: [ALLOW_BODY], connections: CONNECTIONS, durationS: DURATION_S };
      const viaTcp = { url: hit.url, bodies: [ALLOW_BODY], connections: CONNECTIONS, durationS: DURATION_S };
      await rawLoad({ ...viaSock, rate: 0, durationS: 1 });
      const asLoad = (r: RateResult) => ({ rps: r.achievedRps, p50: r.p50, p99: r.p99, non2xx: r.non2xx, errors: r.errors, total: r.sent });
      report(
        await compare({
          name: 'Cache hit over a Unix socket vs loopback TCP (raw-socket generator, closed loop)',
          baselineName: 'loopback TCP',
          subjectName: 'Unix socket',
          baseline: async () => asLoad(await rawLoad({ ...viaTcp, rate: 0 })),
          subject: async () => asLoad(await rawLoad({ ...viaSock, rate: 0 })),
          baselinePids: [s.child.pid],
          subjectPids: [u.child.pid],
          rounds: ROUNDS,
        }),
      );
      const tcpRate = await rawLoad({ ...viaTcp, rate: RATE });
      const sockRate = await rawLoad({ ...viaSock, rate: RATE });
      console.log(`At a fixed ${RATE} req/s (open loop):`);
      console.log(rateLine('loopback TCP', tcpRate));
      console.log(rateLine('Unix socket', sockRate));
      console.log('');
      results.unixSocketFixedRate = { rate: RATE, tcp: tcpRate, unix: sockRate };
    }
  } finally {
    for (const c of cleanup.reverse()) await c();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function cacheScaleSection(): Promise<void> {
  const r = await benchCacheAtScale();
  console.log(`${cacheScaleLines(r).join('\n')}\n`);
  results.cacheAtScale = r;
}

async function coalescingSection(): Promise<void> {
  const c = await benchCoalescing(CLI);
  console.log('Coalescing: 1,000 concurrent identical misses, upstream answering after 300 ms');
  console.log(`  upstream calls: ${c.upstreamCalls} (target: exactly 1); ALLOW answers: ${c.allows}/${c.requests}\n`);
  results.coalescing = c;
}

async function refreshAheadSection(): Promise<void> {
  const durationS = Number(process.env.BENCH_REFRESH_S ?? 30);
  const rows = await benchRefreshAhead(CLI, { rate: RATE, durationS, connections: CONNECTIONS });
  console.log(`${refreshLines(rows, { rate: RATE, durationS }).join('\n')}\n`);
  results.refreshAhead = rows;
}

async function forwardAuthSection(): Promise<void> {
  report(await benchForwardAuth({ rounds: ROUNDS, durationS: DURATION_S, connections: CONNECTIONS }));
}

async function webhooksSection(): Promise<void> {
  await sleep(500);
  for (const c of await benchWebhooks({ rounds: ROUNDS, durationS: DURATION_S, connections: CONNECTIONS })) report(c);
}

// --- gRPC ext_authz: against a bare grpc-js server, and against forward-auth (grpc.ts) ----------
async function grpcSection(): Promise<void> {
  for (const c of await benchGrpc({ rounds: ROUNDS, durationS: DURATION_S, connections: CONNECTIONS })) report(c);
}

// --- tracing: the cache-hit path with OpenTelemetry spans off, on at ratio 1 and at 0.01 (tracing.ts) ----
async function tracingSection(): Promise<void> {
  const t = await benchTracing({ rounds: ROUNDS, durationS: DURATION_S, connections: CONNECTIONS, cli: CLI, beforeCli: process.env.BENCH_TRACING_BEFORE_CLI });
  for (const c of t.comparisons) report(c);
  console.log(`  spans the sink received: ${t.spansExported}\n`);
  results.tracing = { spansExported: t.spansExported };
}

const SECTIONS: [name: string, run: () => Promise<void>][] = [
  ['decision', decisionSection],
  ['webhooks', webhooksSection],
  ['cache-scale', cacheScaleSection],
  ['coalescing', coalescingSection],
  ['refresh-ahead', refreshAheadSection],
  ['forward-auth', forwardAuthSection],
  ['webhook-queue', webhookQueueSection],
  ['tracing', tracingSection],
  ['grpc', grpcSection],
  ['batch', batchSection],
  ['footprint', footprintSection],
  ['client', clientSection],
  ['fleet', fleetSection],
];

async function fleetSection(): Promise<void> {
  // What a fleet costs one Redis: real replicas and emulated ones (its own file).
  const f = await benchFleet();
  console.log(`${fleetLines(f).join('\n')}\n`);
  results.fleet = f;
}

async function batchSection(): Promise<void> {
  // The batch check against single checks on the same sidecar (its own file).
  const b = await benchBatch({ rounds: ROUNDS, durationS: DURATION_S, connections: CONNECTIONS });
  if (!b) return;
  comparisons.push(b.cost);
  console.log(`${batchLines(b).join('\n')}\n`);
  results.batch = b;
}

async function clientSection(): Promise<void> {
  // A check through @consent-sidecar/client against the client before it, CPU of the client process (its own file).
  const c = await benchClient({ rounds: ROUNDS, durationS: DURATION_S, concurrency: 16 });
  if (c) report(c);
}

async function footprintSection(): Promise<void> {
  // What a pod pays: RSS idle and under load, and the time to ready (its own file).
  const rows = await benchFootprint();
  console.log(`${footprintLines(rows).join('\n')}\n`);
  results.footprint = rows;
  const tiering = await benchTiering();
  console.log(`${tieringLines(tiering).join('\n')}\n`);
  results.tiering = tiering;
}

async function webhookQueueSection(): Promise<void> {
  // Queue mode vs passthrough (issue 10): its own file, real serve processes and Redis.
  const q = await benchWebhookQueue();
  console.log(`${queueBenchLines(q).join('\n')}\n`);
  results.webhookQueue = q;
}

async function main(): Promise<void> {
  // Sections by name: `npm run bench -- fleet webhooks`, or BENCH_ONLY=fleet,webhooks.
  const named = process.argv.slice(2).filter((a) => !a.startsWith('-'));
  const only = named.length > 0 ? named : process.env.BENCH_ONLY?.split(',').map((s) => s.trim());
  const unknown = only?.filter((n) => !SECTIONS.some(([name]) => name === n)) ?? [];
  if (unknown.length > 0) throw new Error(`unknown bench section(s): ${unknown.join(', ')} (sections: ${SECTIONS.map(([n]) => n).join(', ')})`);
  const machine = machineLine();
  console.log(`consent-sidecar bench: ${CONNECTIONS} connections, ${ROUNDS} alternating rounds of ${DURATION_S} s per figure`);
  console.log(`machine: ${machine}\n`);
  for (const [name, run] of SECTIONS) if (!only || only.includes(name)) await run();
  console.log('Summary (ratio = sidecar ÷ baseline, median of the rounds; CPU ratio = baseline CPU/request ÷ sidecar CPU/request)');
  for (const c of comparisons) console.log(`  ${fmt(c.ratio, 2).padStart(5)}  CPU ${fmt(c.cpuRatio, 2).padStart(5)}  ${c.name}`);
  const out = process.env.BENCH_JSON ?? 'bench-results.json';
  writeFileSync(out, `${JSON.stringify({ machine, machineAfter: machineLine(), settings: { DURATION_S, ROUNDS, CONNECTIONS, RATE }, comparisons, ...results }, null, 2)}\n`);
  console.log(`\nwritten to ${out}`);
}

await main();
process.exit(0);
