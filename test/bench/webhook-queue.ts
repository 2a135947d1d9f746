/**
 * Queue mode against passthrough (issue 10), both through a real `serve` process with the same
 * Redis (shared dedup in both): accepted deliveries per second, and the time from the service's 200
 * to the app's receipt of the event (p50/p99). In passthrough the app has the event before the 200
 * (the delay is negative: the 200 waits for it); in queue mode the 200 comes first and the workers
 * forward afterwards.
 *
 * The load generator runs in a process of its own (this file with `--load`), signs every delivery
 * fresh with a distinct event id, and reports when each 200 arrived; the app runs here and notes
 * each receipt. Both use `performance.timeOrigin + performance.now()`, one clock for the machine.
 *
 * Alone: `npm run build && node --import tsx test/bench/webhook-queue.ts`. BENCH_DURATION_S
 * (default 6), BENCH_CONNECTIONS (50). Redis: REDIS_URL, or a redis-server spawned on a free port
 * (no persistence: `appendfsync always` would add a disk sync to every XADD).
 */
import { spawn } from 'node:child_process';
import { createHmac, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { getTestRedis } from '../helpers/redis.js';
import { fmt, freePort, startChild, stopChild } from './lib.js';

const SELF = fileURLToPath(import.meta.url);
const CLI = process.env.BENCH_CLI ?? fileURLToPath(new URL('../../dist/cli.js', import.meta.url));
const SECRET = 'whsec_queuebenchqueuebenchqueuebench';
const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 6);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const PAD = 'x'.repeat(300);
const clock = (): number => performance.timeOrigin + performance.now();

interface LoadReport {
  readonly accepted: number;
  readonly refused: number;
  readonly elapsedMs: number;
  /** event id → when its 200 arrived (clock ms). */
  readonly ok: Record<string, number>;
}

/**
 * Child: `connections` closed loops for `durationS` (rate 0: as fast as answers come), or an open
 * loop of `rate` deliveries per second (evenly spaced, at most `connections` in flight). Each
 * delivery is signed here, not by our code.
 */
async function runLoad(url: string, durationS: number, connections: number, tag: string, rate: number): Promise<void> {
  const pool = new Pool(url, { connections });
  const ok: Record<string, number> = {};
  let refused = 0;
  let n = 0;
  const send = async (): Promise<void> => {
    const i = ++n;
    const id = `evt_${tag}_${i}`;
    const body = JSON.stringify({ id, sequence: i, type: 'redec.access.occurred', occurredAt: Date.now(), data: { pad: PAD } });
    const ts = String(Math.floor(Date.now() / 1000));
    const res = await pool.request({
      method: 'POST',
      path: '/webhooks',
      headers: {
        'content-type': 'application/json',
        'x-service-event-id': id,
        'x-service-delivery-id': `dlv_${i}`,
        'x-service-timestamp': ts,
        'x-service-signature': `v1=${createHmac('sha256', SECRET).update(`${ts}.${body}`).digest('hex')}`,
      },
      body,
    });
    await res.body.dump();
    if (res.statusCode === 200) ok[id] = clock();
    else refused++;
  };
  const start = clock();
  const end = start + durationS * 1000;
  if (rate > 0) {
    const inFlight = new Set<Promise<void>>();
    for (let k = 0; start + (k * 1000) / rate < end; k++) {
      const wait = start + (k * 1000) / rate - clock();
      if (wait > 0) await sleep(wait);
      if (inFlight.size >= connections) await Promise.race(inFlight);
      const p: Promise<void> = send().finally(() => inFlight.delete(p));
      inFlight.add(p);
    }
    await Promise.all(inFlight);
  } else {
    const worker = async (): Promise<void> => {
      while (clock() < end) await send();
    };
    await Promise.all(Array.from({ length: connections }, worker));
  }
  const report: LoadReport = { accepted: Object.keys(ok).length, refused, elapsedMs: clock() - start, ok };
  await pool.close();
  // A pipe is written asynchronously: exit only once the whole report is out.
  await new Promise<void>((resolve) => process.stdout.write(`${JSON.stringify(report)}\n`, () => resolve()));
}

function loadInChild(url: string, durationS: number, tag: string, rate = 0): Promise<LoadReport> {
  return new Promise((resolve, reject) => {
    const args = ['--import', 'tsx', SELF, '--load', url, String(durationS), String(CONNECTIONS), tag, String(rate)];
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`load generator exited ${code}`));
      try {
        resolve(JSON.parse(out.trim().split('\n').pop()!) as LoadReport);
      } catch {
        reject(new Error(`load generator report unreadable (${out.length} bytes)`));
      }
    });
  });
}

const pct = (xs: readonly number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

export interface QueueBenchRun {
  /** Deliveries answered 200, per second of load. */
  readonly acceptedPerS: number;
  readonly refused: number;
  /** App receipt − 200 (ms): negative in passthrough (the 200 waits for the app). */
  readonly receiptP50Ms: number;
  readonly receiptP99Ms: number;
  /** Accepted events the app had not received 30 s after the load ended. */
  readonly missing: number;
  /** Events the app received per second, first receipt to last (how fast the workers drain). */
  readonly forwardedPerS: number;
}

/** As fast as it answers (throughput; a queue then builds up), and at a fixed rate it sustains (latency). */
export interface QueueBenchSide {
  readonly max: QueueBenchRun;
  readonly fixed: QueueBenchRun;
}

/** Deliveries per second of the fixed-rate run (BENCH_QUEUE_RATE). */
const FIXED_RATE = Number(process.env.BENCH_QUEUE_RATE ?? 200);

export async function benchWebhookQueue(): Promise<{ passthrough: QueueBenchSide; queue: QueueBenchSide }> {
  const redis = await getTestRedis();
  const received = new Map<string, number>();
  const app = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = clock();
      const id = String(req.headers['x-service-event-id']);
      if (!received.has(id)) received.set(id, at);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
  const appUrl = `http://127.0.0.1:${(app.address() as AddressInfo).port}/hooks`;

  const side = async (mode: 'passthrough' | 'queue'): Promise<QueueBenchSide> => {
    const [hook, admin, decision] = [await freePort(), await freePort(), await freePort()];
    const prefix = `bench-${mode}-${randomBytes(4).toString('hex')}:`;
    const serve = await startChild(
      process.execPath,
      [CLI, 'serve', '--upstream-url', 'http://127.0.0.1:9', '--api-key', 'bench', '--listen', `127.0.0.1:${decision}`, '--webhook-listen', `127.0.0.1:${hook}`,
        '--admin-listen', `127.0.0.1:${admin}`, '--app-webhook-url', appUrl, '--webhook-secret', SECRET, '--webhook-delivery', mode,
        '--redis-url', redis.url, '--redis-key-prefix', prefix, '--log-level', 'warn'],
      `http://127.0.0.1:${admin}/readyz`,
    );
    try {
      const url = `http://127.0.0.1:${hook}`;
      await sleep(300); // Redis connected, workers subscribed
      await loadInChild(url, 1, `${mode}-warm`);
      const measure = async (tag: string, rate: number): Promise<QueueBenchRun> => {
        const report = await loadInChild(url, DURATION_S, tag, rate);
        const ids = Object.keys(report.ok);
        const deadline = Date.now() + 30_000;
        while (ids.some((id) => !received.has(id)) && Date.now() < deadline) await sleep(100);
        const got = ids.filter((id) => received.has(id));
        const delays = got.map((id) => received.get(id)! - report.ok[id]!);
        const times = got.map((id) => received.get(id)!);
        const spanS = times.length > 1 ? (times.reduce((a, b) => Math.max(a, b)) - times.reduce((a, b) => Math.min(a, b))) / 1000 : Number.NaN;
        return {
          forwardedPerS: got.length / spanS,
          acceptedPerS: report.accepted / (report.elapsedMs / 1000),
          refused: report.refused,
          receiptP50Ms: pct(delays, 50),
          receiptP99Ms: pct(delays, 99),
          missing: ids.length - delays.length,
        };
      };
      return { max: await measure(`${mode}-max`, 0), fixed: await measure(`${mode}-fixed`, FIXED_RATE) };
    } finally {
      await stopChild(serve);
    }
  };

  try {
    const passthrough = await side('passthrough');
    const queue = await side('queue');
    return { passthrough, queue };
  } finally {
    await new Promise((r) => app.close(r));
    await redis.stop();
  }
}

export function queueBenchLines(r: { passthrough: QueueBenchSide; queue: QueueBenchSide }): string[] {
  const row = (name: string, s: QueueBenchRun): string =>
    `  ${name.padEnd(24)} ${fmt(s.acceptedPerS).padStart(7)} accepted/s ${fmt(s.forwardedPerS).padStart(7)} forwarded/s   200→app receipt p50 ${fmt(s.receiptP50Ms, 2)} ms   p99 ${fmt(s.receiptP99Ms, 2)} ms   (${s.refused} refused, ${s.missing} never received)`;
  return [
    `Webhooks, queue mode vs passthrough (real serve, same Redis, ${CONNECTIONS} connections, ${DURATION_S} s each; negative: the app had it before the 200)`,
    row('passthrough, max', r.passthrough.max),
    row('queue, max', r.queue.max),
    row(`passthrough, ${FIXED_RATE}/s`, r.passthrough.fixed),
    row(`queue, ${FIXED_RATE}/s`, r.queue.fixed),
  ];
}

if (process.argv[2] === '--load') {
  const [url, durationS, connections, tag, rate] = process.argv.slice(3);
  await runLoad(url!, Number(durationS), Number(connections), tag!, Number(rate ?? 0));
  process.exit(0);
} else if (process.argv[1] === SELF) {
  const r = await benchWebhookQueue();
  for (const l of queueBenchLines(r)) console.log(l);
  console.log(`JSON: ${JSON.stringify(r)}`);
  process.exit(0);
}
