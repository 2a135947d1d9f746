import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { sampleOf } from './sidecar.js';
import { deliveryHeaders } from './webhooks.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CLI = `${ROOT}dist/cli.js`;
export const SECRET = 'whsec_replicas_secret_0123456789';

/** A real `node dist/cli.js serve` process (what a pod runs), on loopback port 0 listeners. */
export class ServeProcess {
  private child: ChildProcess | undefined;
  private out = '';
  /** `grpc`: the grpc-js target, with --grpc-listen. */
  urls: { decision: string; webhook: string; admin: string; grpc?: string } = { decision: '', webhook: '', admin: '' };
  private pools: Pool[] = [];

  /**
   * `env`: variables beside PATH (e.g. the OTEL_* ones); nothing else of this process's environment
   * leaks in. `wrap`: a command the process runs under (e.g. `['prlimit', '--nofile=1024:1024', '--']`).
   * `nodeFlags`: node's own, before the CLI (e.g. the image's, test/helpers/image.ts).
   */
  constructor(
    readonly flags: Record<string, string>,
    readonly env: Record<string, string> = {},
    readonly wrap: readonly string[] = [],
    readonly nodeFlags: readonly string[] = [],
  ) {}

  async start(): Promise<void> {
    if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npm run build\` first (npm test does)`);
    const args = ['serve', ...Object.entries(this.flags).flatMap(([k, v]) => [`--${k}`, v])];
    const [command, ...prefix] = [...this.wrap, process.execPath];
    const child = spawn(command!, [...prefix, ...this.nodeFlags, CLI, ...args], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...this.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    this.out = '';
    await new Promise<void>((resolve, reject) => {
      // A safety net: a loaded machine (stress-ng beside other suites) took more than 15 s to start serve.
      const timer = setTimeout(() => reject(new Error(`serve not started within 60 s:\n${this.out}`)), 60_000);
      let started = false;
      child.stdout!.on('data', (c: Buffer) => {
        this.out += c.toString();
        // Once started, the log is only kept: scanning it all again on every chunk is quadratic on a long run.
        if (started) return;
        for (const line of this.out.split('\n')) {
          if (!line.includes('"event":"started"')) continue;
          const parsed = JSON.parse(line) as { urls: { decision: string; webhook: string; admin: string; grpc?: string } };
          this.urls = parsed.urls;
          started = true;
          clearTimeout(timer);
          resolve();
          return;
        }
      });
      child.stderr!.on('data', (c: Buffer) => (this.out += c.toString()));
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`serve exited ${code} before it started:\n${this.out}`));
      });
    });
    this.pools = [];
  }

  /** The process id while it runs (to read its memory in /proc). */
  get pid(): number | undefined {
    return this.running ? this.child!.pid : undefined;
  }

  /** Whether the process runs now (false once it exited, whoever ended it). */
  get running(): boolean {
    const c = this.child;
    return c !== undefined && c.exitCode === null && c.signalCode === null;
  }

  /** Everything the process wrote so far, stdout and stderr. */
  logsText(): string {
    return this.out;
  }

  /** Log lines (JSON) written so far. */
  logs(): Record<string, unknown>[] {
    return this.out
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  }

  private pool(url: string): Pool {
    const p = new Pool(url, { connections: 64 });
    this.pools.push(p);
    return p;
  }

  private decisionPool: Pool | undefined;
  private adminPool: Pool | undefined;

  async check(userReference: string, configKey: string): Promise<{ status: number; source: string; json: Record<string, unknown> }> {
    this.decisionPool ??= this.pool(this.urls.decision);
    const res = await this.decisionPool.request({
      method: 'POST',
      path: '/v1/authorization/check',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ userReference, configKey }),
    });
    const json = (await res.body.json()) as Record<string, unknown>;
    return { status: res.statusCode, source: String(res.headers['x-consent-decision-source']), json };
  }

  async metric(name: string, labels?: Record<string, string>): Promise<number> {
    this.adminPool ??= this.pool(this.urls.admin);
    const res = await this.adminPool.request({ method: 'GET', path: '/metrics' });
    return sampleOf(await res.body.text(), name, labels);
  }

  /** SIGTERM and wait for the exit (SIGKILL after 10 s). */
  async stop(): Promise<void> {
    await this.end('SIGTERM');
  }

  /** SIGKILL: a pod killed without a chance to release anything. */
  async kill(): Promise<void> {
    await this.end('SIGKILL');
  }

  private async end(signal: NodeJS.Signals): Promise<void> {
    const child = this.child;
    this.child = undefined;
    await Promise.allSettled(this.pools.map((p) => p.destroy()));
    this.pools = [];
    this.decisionPool = undefined;
    this.adminPool = undefined;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      const force = setTimeout(() => child.kill('SIGKILL'), 10_000);
      // 'close', not 'exit': the process can exit before the last of its output is read here, and
      // what a test reads of its logs after stop() must be all of them.
      child.once('close', () => {
        clearTimeout(force);
        resolve();
      });
      child.kill(signal);
    });
  }
}

/** An app on loopback recording what it got; `delayMs` makes it slow, `status` makes it refuse. */
export class RecordingApp {
  readonly received: { id: string; at: number; headers?: Record<string, string | string[] | undefined>; status?: number }[] = [];
  delayMs = 0;
  status = 200;
  private server: Server | undefined;
  url = '';

  /** Listens on `port` (0: a free one); up again after {@link down} on the same port with `up(app.port)`. */
  async up(port = 0): Promise<void> {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const status = this.status;
        this.received.push({ id: (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: string }).id, at: Date.now(), headers: req.headers, status });
        const reply = (): void => void res.writeHead(status).end();
        if (this.delayMs > 0) setTimeout(reply, this.delayMs);
        else reply();
      });
    });
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', () => resolve()));
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
    this.url = `http://127.0.0.1:${this.port}/webhooks`;
  }

  port = 0;

  /** Copies of `id` the app received (whatever it answered). */
  count(id: string): number {
    return this.received.filter((r) => r.id === id).length;
  }

  /** Copies of `id` the app answered 2xx. */
  accepted(id: string): number {
    return this.received.filter((r) => r.id === id && (r.status ?? 200) < 300).length;
  }

  async down(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }
}

/** An event signed as the service signs it (HMAC-SHA256 over `${ts}.${body}`, computed here, not by our code). */
export function signedEvent(id: string, sequence: number, type = 'test.event', data: Record<string, unknown> = {}): { body: string; headers: Record<string, string> } {
  const body = JSON.stringify({ id, sequence, type, occurredAt: Date.now(), data });
  return { body, headers: deliveryHeaders(SECRET, Math.floor(Date.now() / 1000), body, id) };
}

/** One delivery of `event` to a replica's webhook ingress, as the service makes it (`signal`: its own deadline). */
export async function deliver(
  replica: ServeProcess,
  event: { body: string; headers: Record<string, string> },
  signal?: AbortSignal,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${replica.urls.webhook}/webhooks`, { method: 'POST', headers: event.headers, body: event.body, ...(signal ? { signal } : {}) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/**
 * Flags of one replica of a fleet sharing `redisUrl` under `prefix` (or another topology: pass
 * `redis`, e.g. `{ 'redis-cluster-nodes': seeds }`, and no `redisUrl`).
 */
export function replicaFlags(o: {
  upstreamUrl: string;
  apiKey: string;
  appUrl: string;
  redisUrl?: string;
  redis?: Record<string, string>;
  prefix: string;
  extra?: Record<string, string>;
}): Record<string, string> {
  return {
    'upstream-url': o.upstreamUrl,
    'api-key': o.apiKey,
    listen: '127.0.0.1:0',
    'webhook-listen': '127.0.0.1:0',
    'admin-listen': '127.0.0.1:0',
    'app-webhook-url': o.appUrl,
    'webhook-secret': SECRET,
    'webhook-forward-timeout-ms': '2000',
    ...(o.redisUrl !== undefined ? { 'redis-url': o.redisUrl } : {}),
    ...o.redis,
    'redis-key-prefix': o.prefix,
    'shutdown-timeout-ms': '2000',
    ...o.extra,
  };
}
