/**
 * Webhook ingress throughput: verified deliveries per second forwarded to a loopback app through the
 * real listener, against a bare `node:http` handler that only reads the body and computes the HMAC.
 * Both servers run in child processes (this same file, with a role argument) so autocannon does not
 * share their event loop; the loopback app gets a process of its own. Every request carries a fresh
 * timestamp and a distinct event id, signed as it is sent, so nothing is short-circuited by dedup.
 *
 * Alone: `node --import tsx test/bench/webhooks.ts` (BENCH_DURATION_S, BENCH_CONNECTIONS).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import { fileURLToPath, pathToFileURL } from 'node:url';
import autocannon from 'autocannon';

const SELF = fileURLToPath(import.meta.url);
const SECRET = 'whsec_benchbenchbenchbenchbenchbench';
const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 6);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const PAD = 'x'.repeat(300);

const hmacHex = (ts: string, body: Buffer): string => createHmac('sha256', SECRET).update(`${ts}.`).update(body).digest('hex');

/**
 * Where the sidecar child loads the listener from: `dist/` when `npm run bench` has just built it
 * (production runs compiled JS), else `src/` through tsx. BENCH_WEBHOOK_CODE=src|dist|<dir> forces one.
 */
function codeRoot(): string {
  const forced = process.env.BENCH_WEBHOOK_CODE;
  const dist = new URL('../../dist/', import.meta.url);
  const src = new URL('../../src/', import.meta.url);
  if (forced === 'src') return src.href;
  if (forced === 'dist') return dist.href;
  if (forced) return pathToFileURL(`${forced.replace(/\/+$/, '')}/`).href;
  return process.env.npm_lifecycle_event === 'bench' && existsSync(new URL('webhooks/index.js', dist)) ? dist.href : src.href;
}

/** Child: the real webhook listener, forwarding to `appUrl`. */
async function serveSidecar(appUrl: string, root: string): Promise<void> {
  const load = <T>(path: string): Promise<T> => import(new URL(path, root).href) as Promise<T>;
  const { staticSecret } = await load<typeof import('../../src/config/index.js')>('config/index.js');
  const { createWebhookListener } = await load<typeof import('../../src/http/webhook-listener.js')>('http/webhook-listener.js');
  const { listen } = await load<typeof import('../../src/http/listen.js')>('http/listen.js');
  const { createLogger, createRegistry } = await load<typeof import('../../src/observability/index.js')>('observability/index.js');
  const listener = createWebhookListener({
    config: {
      appUrl: new URL(appUrl),
      path: '/webhooks',
      secrets: staticSecret([SECRET], 'bench'),
      toleranceS: 300,
      maxBodyBytes: 1_048_576,
      requiredHeader: null,
      forwardTimeoutMs: 10_000,
      dedupLeaseMs: 15_000,
      queueHorizonMs: 259_200_000,
      delivery: 'passthrough',
      dedupRetentionMs: 86_400_000,
      dedupMaxEntries: 1_000_000,
      maxUnverifiedBytes: 16_777_216,
      bodyTimeoutMs: 10_000,
    },
    // As `serve --log-level warn` in the decision bench: no line per accepted event.
    logger: createLogger('warn'),
    registry: createRegistry(),
    revocations: { revokeUser: () => 0, revokeAll: () => 0 },
  });
  const info = await listen(listener.server, { host: '127.0.0.1', port: 0 });
  process.stdout.write(`ready ${info.port}\n`);
}

/** Child: the baseline, reading the body and checking the HMAC, nothing else. */
function serveBaseline(): void {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const ts = String(req.headers['x-service-timestamp']);
      const given = Buffer.from(String(req.headers['x-service-signature']).slice(3));
      const expected = Buffer.from(hmacHex(ts, Buffer.concat(chunks)));
      const ok = given.length === expected.length && timingSafeEqual(given, expected);
      res.writeHead(ok ? 200 : 401, { 'content-type': 'application/json' }).end('{"status":"accepted"}');
    });
  });
  server.listen(0, '127.0.0.1', () => process.stdout.write(`ready ${(server.address() as { port: number }).port}\n`));
}

/** Child: the application behind the sidecar; accepts everything. */
function serveApp(): void {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(204).end());
  });
  server.listen(0, '127.0.0.1', () => process.stdout.write(`ready ${(server.address() as { port: number }).port}\n`));
}

async function child(role: string, ...args: string[]): Promise<{ proc: ChildProcess; port: number }> {
  const flags = process.env.BENCH_CPU_PROF && role === '--serve-sidecar' ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_CPU_PROF] : [];
  const proc = spawn(process.execPath, [...flags, '--import', 'tsx', SELF, role, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    proc.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /ready (\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    proc.once('exit', (code) => reject(new Error(`${role} exited with ${code}`)));
    setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`${role} never became ready`));
    }, 20_000).unref();
  });
  return { proc, port };
}

function stop(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null) return Promise.resolve();
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  proc.kill('SIGTERM');
  return exited;
}

/** Same settings for both targets; each request signed fresh with a distinct id. */
async function measure(port: number, prefix: string, durationS: number): Promise<{ rps: number; non2xx: number; errors: number }> {
  let n = 0;
  const result = await autocannon({
    url: `http://127.0.0.1:${port}`,
    connections: CONNECTIONS,
    duration: durationS,
    requests: [
      {
        setupRequest: (req) => {
          n += 1;
          const body = Buffer.from(
            JSON.stringify({ id: `evt_${prefix}_${n}`, sequence: n, type: 'redec.access.occurred', occurredAt: Date.now(), data: { pad: PAD } }),
          );
          const ts = String(Math.floor(Date.now() / 1000));
          return {
            ...req,
            method: 'POST',
            path: '/webhooks',
            headers: {
              'content-type': 'application/json',
              'x-service-event-id': `evt_${prefix}_${n}`,
              'x-service-delivery-id': `dlv_${n}`,
              'x-service-timestamp': ts,
              'x-service-signature': `v1=${hmacHex(ts, body)}`,
            },
            body: body as unknown as string,
          };
        },
      },
    ],
  });
  return { rps: result.requests.average, non2xx: result.non2xx, errors: result.errors + result.timeouts };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

/**
 * Verified deliveries/s through the sidecar to an app vs the bare HMAC handler, and their ratio.
 * The two targets are measured in alternating rounds and the medians compared, so a neighbour's
 * burst on a shared machine does not land on one side only.
 */
export async function benchWebhooks(): Promise<{ sidecarRps: number; baselineRps: number; ratio: number }> {
  const rounds = Number(process.env.BENCH_WEBHOOK_ROUNDS ?? 3);
  const roundS = Math.max(1, Math.round(DURATION_S / rounds));
  const started: ChildProcess[] = [];
  const start = async (role: string, ...args: string[]): Promise<number> => {
    const c = await child(role, ...args);
    started.push(c.proc);
    return c.port;
  };
  const runs = { baseline: [] as number[], sidecar: [] as number[] };
  let bad = 0;
  try {
    const baseline = { port: await start('--serve-baseline') };
    const app = { port: await start('--serve-app') };
    const sidecar = { port: await start('--serve-sidecar', `http://127.0.0.1:${app.port}/hooks`, codeRoot()) };
    await measure(baseline.port, 'warmup-b', 1);
    await measure(sidecar.port, 'warmup-s', 1);
    for (let r = 0; r < rounds; r++) {
      const b = await measure(baseline.port, `b${r}`, roundS);
      const s = await measure(sidecar.port, `s${r}`, roundS);
      runs.baseline.push(b.rps);
      runs.sidecar.push(s.rps);
      bad += b.non2xx + b.errors + s.non2xx + s.errors;
    }
  } finally {
    await Promise.all(started.map(stop));
  }
  if (process.env.BENCH_VERBOSE) {
    const u = process.cpuUsage();
    process.stderr.write(`load generator: cpu ${((u.user + u.system) / 1e6).toFixed(1)} s; rounds ${JSON.stringify(runs)}\n`);
  }
  if (bad > 0) process.stderr.write(`webhook bench: ${bad} non-2xx answers or errors\n`);
  const [sidecarRps, baselineRps] = [median(runs.sidecar), median(runs.baseline)];
  return { sidecarRps, baselineRps, ratio: sidecarRps / baselineRps };
}

/** With BENCH_VERBOSE, a child says how much CPU it used (to see where the time goes). */
function exitReporting(role: string): never {
  if (process.env.BENCH_VERBOSE) {
    const u = process.cpuUsage();
    process.stderr.write(`${role}: cpu ${((u.user + u.system) / 1e6).toFixed(1)} s (user ${(u.user / 1e6).toFixed(1)}, system ${(u.system / 1e6).toFixed(1)})\n`);
  }
  process.exit(0);
}

const role = process.argv[2];
if (role === '--serve-sidecar') {
  await serveSidecar(process.argv[3] as string, process.argv[4] as string);
  process.on('SIGTERM', () => exitReporting(role));
} else if (role === '--serve-baseline') {
  serveBaseline();
  process.on('SIGTERM', () => exitReporting(role));
} else if (role === '--serve-app') {
  serveApp();
  process.on('SIGTERM', () => exitReporting(role));
} else if (process.argv[1] === SELF) {
  const r = await benchWebhooks();
  console.log(
    `webhooks: sidecar ${r.sidecarRps.toFixed(0)} deliveries/s, bare HMAC handler ${r.baselineRps.toFixed(0)} req/s, ratio ${r.ratio.toFixed(2)} (target >= 0.50)`,
  );
  process.exit(0);
}
