/**
 * `npm run bench`: every figure is measured against a bare baseline in the same run, with the
 * same load generator (autocannon, in this process) and settings; servers run in child processes
 * so the generator and the server under test do not share a core. Environment:
 * BENCH_DURATION_S (default 8), BENCH_CONNECTIONS (50), BENCH_RATE (5000), BENCH_UPSTREAM_LATENCY_MS (2).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, request } from 'undici';
import { startSimulator } from '../../src/simulator/index.js';
import { benchWebhooks } from './webhooks.js';
import { benchWebhookQueue, queueBenchLines } from './webhook-queue.js';
import { fixedRate, fmt, freePort, load, startChild, stopChild, type LoadResult, type RateResult } from './lib.js';

const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 8);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const RATE = Number(process.env.BENCH_RATE ?? 5000);
const UPSTREAM_LATENCY_MS = Number(process.env.BENCH_UPSTREAM_LATENCY_MS ?? 2);
const CLI = new URL('../../dist/cli.js', import.meta.url).pathname;
const BARE = new URL('./bare-server.mjs', import.meta.url).pathname;
const CHECK = '/v1/authorization/check';
const ALLOW_BODY = JSON.stringify({ userReference: 'alice', configKey: 'marketing-email' });

async function sidecar(upstreamUrl: string, apiKey: string, extra: string[] = []) {
  const [port, admin] = [await freePort(), await freePort()];
  const child = await startChild(
    process.execPath,
    [CLI, 'serve', '--upstream-url', upstreamUrl, '--api-key', apiKey, '--listen', `127.0.0.1:${port}`, '--admin-listen', `127.0.0.1:${admin}`, '--log-level', 'warn', ...extra],
    `http://127.0.0.1:${admin}/readyz`,
  );
  return { child, url: `http://127.0.0.1:${port}` };
}

function rateLine(name: string, r: RateResult): string {
  return `  ${name.padEnd(28)} ${fmt(r.achievedRps).padStart(8)} req/s   p50 ${fmt(r.p50, 3)} ms   p99 ${fmt(r.p99, 3)} ms   p99.9 ${fmt(r.p999, 3)} ms   max ${fmt(r.max, 1)} ms   (${fmt(r.sent)} requests, ${r.non2xx} non-2xx, ${r.errors} errors)`;
}

function line(name: string, r: LoadResult): string {
  return `  ${name.padEnd(28)} ${fmt(r.rps).padStart(8)} req/s   p50 ${fmt(r.p50, 2)} ms   p99 ${fmt(r.p99, 2)} ms   (${fmt(r.total)} requests, ${r.non2xx} non-2xx, ${r.errors} errors)`;
}

/** 1,000 concurrent identical misses against a slow upstream that counts what reaches it. */
async function coalescing(): Promise<{ requests: number; upstreamCalls: number; allows: number }> {
  let calls = 0;
  const upstream: Server = createServer((req, res) => {
    calls++;
    req.resume();
    req.on('end', () =>
      setTimeout(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ decision: 'ALLOW', configKey: 'marketing-email', validUntil: Date.now() + 60_000 }));
      }, 300),
    );
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const s = await sidecar(`http://127.0.0.1:${(upstream.address() as AddressInfo).port}`, 'bench-key');
  const agent = new Agent({ connections: 1000 });
  try {
    const N = 1000;
    const answers = await Promise.all(
      Array.from({ length: N }, async () => {
        const res = await request(`${s.url}${CHECK}`, { method: 'POST', body: ALLOW_BODY, headers: { 'content-type': 'application/json' }, dispatcher: agent });
        return ((await res.body.json()) as { decision: string }).decision;
      }),
    );
    return { requests: N, upstreamCalls: calls, allows: answers.filter((d) => d === 'ALLOW').length };
  } finally {
    await agent.close();
    await stopChild(s.child);
    await new Promise((r) => upstream.close(r));
  }
}

async function main(): Promise<void> {
  console.log(`consent-sidecar bench: ${CONNECTIONS} connections, ${DURATION_S} s per run, fixed rate ${RATE} req/s, Node ${process.version}\n`);
  const sim = await startSimulator({ port: 0, latencyMs: UPSTREAM_LATENCY_MS, decisionLifetimeMs: 3_600_000 });
  const results: Record<string, unknown> = {};
  try {
    // --- cache-hit path vs bare node:http -------------------------------------------------
    const hit = await sidecar(sim.url, sim.apiKey);
    const warm = await request(`${hit.url}${CHECK}`, { method: 'POST', body: ALLOW_BODY, headers: { 'content-type': 'application/json' } });
    const warmBody = await warm.body.text();
    if (!warmBody.includes('"ALLOW"')) throw new Error(`warm-up did not get an ALLOW: ${warmBody}`);
    const barePort = await freePort();
    const bare = await startChild(process.execPath, [BARE, String(barePort), warmBody], `http://127.0.0.1:${barePort}/ready`);
    const bareUrl = `http://127.0.0.1:${barePort}${CHECK}`;
    const hitUrl = `${hit.url}${CHECK}`;
    try {
      await load({ url: bareUrl, body: ALLOW_BODY, connections: CONNECTIONS, durationS: 2 });
      await load({ url: hitUrl, body: ALLOW_BODY, connections: CONNECTIONS, durationS: 2 });
      const bareMax = await load({ url: bareUrl, body: ALLOW_BODY, connections: CONNECTIONS, durationS: DURATION_S });
      const hitMax = await load({ url: hitUrl, body: ALLOW_BODY, connections: CONNECTIONS, durationS: DURATION_S });
      const bareRate = await fixedRate({ url: bareUrl, body: ALLOW_BODY, rate: RATE, durationS: DURATION_S, connections: CONNECTIONS });
      const hitRate = await fixedRate({ url: hitUrl, body: ALLOW_BODY, rate: RATE, durationS: DURATION_S, connections: CONNECTIONS });
      console.log('Decision API, cache hit (POST /v1/authorization/check, ALLOW from cache)');
      console.log(line('bare node:http', bareMax));
      console.log(line('sidecar cache hit', hitMax));
      console.log(`  throughput ratio sidecar/bare: ${fmt(hitMax.rps / bareMax.rps, 2)} (target >= 0.70)`);
      console.log(`At a fixed ${RATE} req/s (open loop, evenly spaced, latency from each request's due time):`);
      console.log(rateLine('bare node:http', bareRate));
      console.log(rateLine('sidecar cache hit', hitRate));
      console.log(`  sidecar p99 ${fmt(hitRate.p99, 3)} ms (target <= 2 ms)\n`);
      results.cacheHit = { bare: bareMax, sidecar: hitMax, ratio: hitMax.rps / bareMax.rps, fixedRate: { rate: RATE, bare: bareRate, sidecar: hitRate } };
    } finally {
      await stopChild(bare);
      await stopChild(hit.child);
    }

    // --- miss path (cache off) vs calling the simulator directly ----------------------------
    const miss = await sidecar(sim.url, sim.apiKey, ['--cache-max-entries', '0']);
    try {
      const direct = await load({
        url: `${sim.url}${CHECK}`,
        body: ALLOW_BODY,
        connections: CONNECTIONS,
        durationS: Math.max(3, DURATION_S / 2),
        headers: { authorization: `Bearer ${sim.apiKey}` },
      });
      const through = await load({ url: `${miss.url}${CHECK}`, body: ALLOW_BODY, connections: CONNECTIONS, durationS: Math.max(3, DURATION_S / 2) });
      console.log(`Decision API, miss path (cache off; simulator upstream with ${UPSTREAM_LATENCY_MS} ms latency, in the bench process)`);
      console.log(line('simulator directly', direct));
      console.log(line('through the sidecar', through));
      console.log(`  throughput ratio sidecar/direct: ${fmt(through.rps / direct.rps, 2)}\n`);
      results.missPath = { direct, sidecar: through, ratio: through.rps / direct.rps };
    } finally {
      await stopChild(miss.child);
    }
  } finally {
    await sim.close();
  }

  // --- coalescing --------------------------------------------------------------------------
  const c = await coalescing();
  console.log('Coalescing: 1,000 concurrent identical misses, upstream answering after 300 ms');
  console.log(`  upstream calls: ${c.upstreamCalls} (target: exactly 1); ALLOW answers: ${c.allows}/${c.requests}\n`);
  results.coalescing = c;

  // --- webhooks ----------------------------------------------------------------------------
  await sleep(500);
  const w = await benchWebhooks();
  console.log('Webhooks: verified deliveries forwarded to a loopback app vs a bare handler that only computes the HMAC');
  console.log(`  bare HMAC handler ${fmt(w.baselineRps)} req/s, sidecar ${fmt(w.sidecarRps)} req/s, ratio ${fmt(w.ratio, 2)} (target >= 0.50)\n`);
  results.webhooks = w;
  // Queue mode vs passthrough (issue 10): its own file, real serve processes and Redis.
  const q = await benchWebhookQueue();
  console.log(`${queueBenchLines(q).join('\n')}\n`);
  results.webhookQueue = q;
  console.log(`JSON: ${JSON.stringify(results)}`);
}

await main();
process.exit(0);
