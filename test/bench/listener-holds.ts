/**
 * The listeners under a hostile peer, measured from outside against a real `serve` (issue figures,
 * not a speed bench: nothing here is a ratio). Each server runs in a process of its own (serve, the
 * upstream and the app of baselines.mjs; the gRPC stream hold in grpc-hold.ts); the connection holds
 * and the genuine clients run here.
 *
 * 1. Webhook and decision listeners, 256 connections from 127.0.0.2 (keep-alive `GET /x` every 3 s,
 *    or trickled header lines), renewed when cut: genuine signed deliveries (checks) from 127.0.0.1,
 *    one every 500 ms for HOLDS_SECONDS (25), each on a new connection: how many were accepted.
 * 2. gRPC: 48 streams each holding 6 MiB of a declared 8 MiB CheckRequest (--grpc-max-message-bytes
 *    8 MiB): serve's RSS before and at its peak; an HTTP check and a gRPC Check during the hold.
 * 3. gRPC: 256 connections that never send the HTTP/2 preface (from 127.0.0.2, then from 127.0.0.1):
 *    the time a new caller takes to get its decision.
 *
 *   npm run build && node --import tsx test/bench/listener-holds.ts
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { checkRequest, GrpcClient } from '../helpers/grpc.js';
import { Hold, requestOnNewConnection, type HoldMode } from '../helpers/hold-connections.js';
import { signedEvent, SECRET } from '../helpers/serve-process.js';
import { startGrpcHold } from './grpc-hold.js';
import { freePort, startChild, stopChild } from './lib.js';
import { rssOf } from './webhook-flood.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BASELINES = new URL('./baselines.mjs', import.meta.url).pathname;
const SECONDS = Number(process.env.HOLDS_SECONDS ?? 25);
const MiB = 1024 * 1024;

async function startServe(extra: Record<string, string>): Promise<{ child: ChildProcess; urls: Record<string, string> }> {
  const args = Object.entries(extra).flatMap(([k, v]) => [`--${k}`, v]);
  const child = spawn(process.execPath, ['dist/cli.js', 'serve', ...args], { cwd: ROOT, env: { PATH: process.env.PATH ?? '' }, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  const urls = await new Promise<Record<string, string>>((resolve, reject) => {
    child.stdout!.on('data', function onData(c: Buffer) {
      out += c.toString();
      const line = out.split('\n').find((l) => l.includes('"event":"started"'));
      if (line) {
        child.stdout!.off('data', onData);
        child.stdout!.resume();
        resolve((JSON.parse(line) as { urls: Record<string, string> }).urls);
      }
    });
    child.once('exit', (code) => reject(new Error(`serve exited ${code}: ${out}`)));
  });
  return { child, urls };
}

async function holdAndAsk(url: string, mode: HoldMode, trickleTarget: string, ask: (i: number) => Promise<boolean>): Promise<string> {
  const { hostname, port } = new URL(url);
  const hold = new Hold({ host: hostname, port: Number(port), localAddress: '127.0.0.2', count: 256, mode, trickleTarget });
  await sleep(2000); // let the hold fill the listener (pace, not a wait for anything)
  let ok = 0;
  let n = 0;
  const end = performance.now() + SECONDS * 1000;
  while (performance.now() < end) {
    if (await ask(n++)) ok++;
    await sleep(500);
  }
  hold.stop();
  return `${ok} of ${n} accepted (hold: ${hold.connects} connections made, ${hold.cuts} cut)`;
}

async function main(): Promise<void> {
  const children: ChildProcess[] = [];
  try {
    const up = await freePort();
    children.push(await startChild(process.execPath, [BASELINES, 'upstream', String(up), String(Date.now() + 3_600_000)], `http://127.0.0.1:${up}/ready`));
    const appPort = await freePort();
    children.push(await startChild(process.execPath, [BASELINES, 'app', String(appPort)], `http://127.0.0.1:${appPort}/ready`));
    const common = { 'upstream-url': `http://127.0.0.1:${up}`, 'api-key': 'k', 'admin-listen': '127.0.0.1:0', 'redec-reconcile-interval-ms': '0' };

    // 1. HTTP listeners.
    const http = await startServe({ ...common, listen: '127.0.0.1:0', 'webhook-listen': '127.0.0.1:0', 'app-webhook-url': `http://127.0.0.1:${appPort}/hooks`, 'webhook-secret': SECRET, 'max-connections': '256' });
    children.push(http.child);
    for (const mode of ['keep-alive', 'trickle'] as const) {
      const webhook = await holdAndAsk(http.urls.webhook!, mode, 'POST /webhooks', async (i) => {
        const e = signedEvent(`evt_holds_${mode}_${i}`, i);
        return (await requestOnNewConnection({ url: `${http.urls.webhook}/webhooks`, method: 'POST', headers: e.headers, body: e.body, localAddress: '127.0.0.1' })).status === 200;
      });
      console.log(`webhook listener, ${mode} hold from 127.0.0.2, genuine deliveries from 127.0.0.1 over ${SECONDS} s: ${webhook}`);
      const decision = await holdAndAsk(http.urls.decision!, mode, 'POST /v1/authorization/check', async (i) => {
        const r = await requestOnNewConnection({ url: `${http.urls.decision}/v1/authorization/check`, method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ userReference: `u${i}`, configKey: 'k' }), localAddress: '127.0.0.1' });
        return r.status === 200;
      });
      console.log(`decision listener (--max-connections 256), ${mode} hold from 127.0.0.2, checks from 127.0.0.1 over ${SECONDS} s: ${decision}`);
    }
    await stopChild(http.child);

    // 2. gRPC stream hold.
    const g = await startServe({ ...common, listen: '127.0.0.1:0', 'grpc-listen': '127.0.0.1:0', 'grpc-max-message-bytes': String(8 * MiB), 'grpc-request-timeout-ms': '600000' });
    children.push(g.child);
    await sleep(500);
    const before = rssOf(g.child.pid!);
    let peak = before;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        peak = Math.max(peak, rssOf(g.child.pid!));
        await sleep(50);
      }
    })();
    const hold = startGrpcHold({ target: g.urls.grpc!, connections: 4, streamsPerConnection: 12, declared: 8 * MiB, push: 6 * MiB });
    const outcome = await hold.settled;
    const client = new GrpcClient(g.urls.grpc!);
    const t0 = performance.now();
    const answer = await client.check(checkRequest({ 'x-user-reference': 'alice' }, { configKey: 'k' }));
    const grpcMs = performance.now() - t0;
    const check = await requestOnNewConnection({ url: `http://${g.urls.decision!.replace(/^http:\/\//, '')}/v1/authorization/check`, method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ userReference: 'bob', configKey: 'k' }) });
    await sleep(1000);
    sampling = false;
    await sampler;
    console.log(
      `gRPC, 48 streams × 6 MiB of a declared 8 MiB: RSS ${(before / MiB).toFixed(0)} → peak ${(peak / MiB).toFixed(0)} MiB; streams ${JSON.stringify(outcome)}; ` +
        `serve alive: ${g.child.exitCode === null}; gRPC Check during the hold: code ${answer.res?.status?.code ?? (answer.err ? `error ${answer.err.code}` : 0)} in ${grpcMs.toFixed(0)} ms; HTTP check: ${check.status}`,
    );
    hold.stop();
    client.close();
    await stopChild(g.child);

    // 3. Preface-less connections.
    for (const from of ['127.0.0.2', '127.0.0.1']) {
      const p = await startServe({ ...common, listen: '127.0.0.1:0', 'grpc-listen': '127.0.0.1:0' });
      children.push(p.child);
      const [host, port] = [p.urls.grpc!.split(':')[0]!, Number(p.urls.grpc!.split(':')[1])];
      const silent = new Hold({ host, port, localAddress: from, count: 256, mode: 'silent' });
      await sleep(2000);
      const c = new GrpcClient(p.urls.grpc!);
      const t = performance.now();
      const r = await c.check(checkRequest({ 'x-user-reference': 'carol' }, { configKey: 'k' }));
      const ms = performance.now() - t;
      console.log(`gRPC, 256 preface-less connections from ${from} (${silent.open} open): a new caller's decision ${r.err ? `error ${r.err.code}` : `code ${r.res?.status?.code ?? 0}`} in ${ms.toFixed(0)} ms`);
      silent.stop();
      c.close();
      await stopChild(p.child);
    }
  } finally {
    for (const c of children) await stopChild(c).catch(() => undefined);
  }
}

void main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
