/**
 * Unauthenticated load on the webhook ingress (issue 8, item 3): CONNECTIONS hostile connections,
 * each with a fresh timestamp and a made-up `v1=` signature, declaring BYTES of body, pushing all
 * but the last byte and holding the connection open; the sidecar's RSS is sampled from /proc while they do. The load runs in its own
 * process; the sidecar is a real `serve` process.
 *
 * `npx tsx test/bench/webhook-flood.ts` (FLOOD_CONNECTIONS 1000, FLOOD_BYTES 1048576, FLOOD_HOLD_MS 3000).
 * Also used by test/e2e/webhook-flood.test.ts.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

const SELF = fileURLToPath(import.meta.url);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const FLOOD_SECRET = 'whsec_flood-bench-secret';

/** Resident set size of a process (bytes), from /proc. */
export function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : Number.NaN;
}

export interface FloodResult {
  /** Answers the hostile connections got, by status ("none" when the socket closed without one). */
  readonly statuses: Record<string, number>;
}

/**
 * Runs the hostile load in a separate process against `host:port` and resolves when it is over:
 * after `holdMs` of holding what was not answered, or, with `holdMs` 0, once every connection has
 * its answer.
 */
export function runFloodLoad(port: number, path: string, connections: number, bytes: number, holdMs: number): Promise<FloodResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', SELF, '--load', String(port), path, String(connections), String(bytes), String(holdMs)], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      const line = out.split('\n').find((l) => l.startsWith('result '));
      if (code !== 0 || !line) reject(new Error(`flood load exited ${code}: ${out}`));
      else resolve(JSON.parse(line.slice('result '.length)) as FloodResult);
    });
  });
}

/** Child: opens the hostile connections, pushes their bodies, holds them, then drops them. */
async function load(port: number, path: string, connections: number, bytes: number, holdMs: number): Promise<void> {
  const chunk = Buffer.alloc(64 * 1024, 0x61);
  const statuses: Record<string, number> = {};
  const sockets: Socket[] = [];
  const done: Promise<void>[] = [];
  for (let i = 0; i < connections; i++) {
    const socket = connect(port, '127.0.0.1');
    sockets.push(socket);
    let head = '';
    done.push(
      new Promise<void>((resolve) => {
        let settled = false;
        const settle = (status: string): void => {
          if (settled) return;
          settled = true;
          statuses[status] = (statuses[status] ?? 0) + 1;
          resolve();
        };
        socket.on('data', (d: Buffer) => {
          head += d.toString('latin1');
          const m = /^HTTP\/1\.1 (\d{3})/.exec(head);
          if (m) settle(m[1]!);
        });
        socket.on('error', () => settle('none'));
        socket.on('close', () => settle('none'));
        socket.on('connect', async () => {
          const ts = Math.floor(Date.now() / 1000);
          socket.write(
            `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${bytes}\r\n` +
              `x-service-timestamp: ${ts}\r\nx-service-signature: v1=${'0'.repeat(64)}\r\nx-service-event-id: evt_flood_${i}\r\n\r\n`,
          );
          // One byte short of what was declared: the body never completes, so a sidecar that
          // buffers before verifying holds all of it until the connection goes.
          const pushed = bytes - 1;
          for (let sent = 0; sent < pushed && !socket.destroyed; sent += chunk.length) {
            const n = Math.min(chunk.length, pushed - sent);
            if (!socket.write(n === chunk.length ? chunk : chunk.subarray(0, n))) await new Promise((r) => socket.once('drain', r).once('close', r));
          }
        });
      }),
    );
  }
  if (holdMs === 0) {
    // Until every connection has its answer (the sidecar's body timeout ends the ones it took in).
    await Promise.all(done);
  } else {
    // Hold: whatever was not answered by now stays open for holdMs more, then everything is dropped.
    await Promise.race([Promise.all(done), sleep(holdMs * 2)]);
    await sleep(holdMs);
  }
  for (const s of sockets) {
    if (!s.destroyed) statuses.held = (statuses.held ?? 0) + 1;
    s.destroy();
  }
  process.stdout.write(`result ${JSON.stringify({ statuses })}\n`);
}

/** Starts a real `serve` process (the build when there is one, else the source through tsx) with the webhook ingress pointed at `appUrl`. */
export async function startServe(appUrl: string, extra: string[] = []): Promise<{ child: ChildProcess; webhook: string; admin: string }> {
  const cli = existsSync(`${ROOT}dist/cli.js`) ? ['dist/cli.js'] : ['--import', 'tsx', 'src/cli.ts'];
  const child = spawn(
    process.execPath,
    [...cli, 'serve', '--upstream-url', 'http://127.0.0.1:9', '--api-key', 'k', '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0', '--webhook-listen', '127.0.0.1:0',
      '--app-webhook-url', appUrl, '--webhook-secret', FLOOD_SECRET, ...extra],
    { cwd: ROOT, env: { PATH: process.env.PATH ?? '' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  const started = await new Promise<{ webhook: string; admin: string }>((resolve, reject) => {
    child.stdout!.on('data', function onData(c: Buffer) {
      out += c.toString();
      const w = /"webhook":"(http:\/\/[^"]+)"/.exec(out);
      const a = /"admin":"(http:\/\/[^"]+)"/.exec(out);
      if (w && a) {
        child.stdout!.off('data', onData);
        resolve({ webhook: w[1]!, admin: a[1]! });
      }
    });
    child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
    child.on('exit', (code) => reject(new Error(`serve exited ${code}: ${out}`)));
  });
  // Keep draining its output so a full pipe never blocks the process.
  child.stdout!.resume();
  child.stderr!.resume();
  return { child, ...started };
}

/** A delivery signed the way the service signs (computed here, independently of src/). */
export function genuineDelivery(id: string): { body: Buffer; headers: Record<string, string> } {
  const body = Buffer.from(JSON.stringify({ id, sequence: 1, type: 'consent.granted', occurredAt: Date.now(), data: {} }));
  const ts = String(Math.floor(Date.now() / 1000));
  const sig = createHmac('sha256', Buffer.from(FLOOD_SECRET, 'utf8')).update(`${ts}.`).update(body).digest('hex');
  return { body, headers: { 'content-type': 'application/json', 'x-service-timestamp': ts, 'x-service-signature': `v1=${sig}`, 'x-service-event-id': id } };
}

export function startApp(): Promise<{ server: Server; url: string; received: string[] }> {
  const received: string[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push(Buffer.concat(chunks).toString());
      res.writeHead(204).end();
    });
  });
  return new Promise((r) => server.listen(0, '127.0.0.1', () => r({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`, received })));
}

async function main(): Promise<void> {
  const connections = Number(process.env.FLOOD_CONNECTIONS ?? 1000);
  const bytes = Number(process.env.FLOOD_BYTES ?? 1_048_576);
  const holdMs = Number(process.env.FLOOD_HOLD_MS ?? 3000);
  const app = await startApp();
  const s = await startServe(app.url, (process.env.FLOOD_SERVE_FLAGS ?? '').split(' ').filter(Boolean));
  try {
    await sleep(500);
    const before = rssOf(s.child.pid!);
    let peak = before;
    let notReady = 0;
    let probes = 0;
    let flooding = true;
    const sampler = (async () => {
      while (flooding) {
        peak = Math.max(peak, rssOf(s.child.pid!));
        probes++;
        try {
          const r = await fetch(`${s.admin}/readyz`, { signal: AbortSignal.timeout(2000) });
          if (r.status !== 200) notReady++;
        } catch {
          notReady++;
        }
        await sleep(100);
      }
    })();
    const t0 = Date.now();
    const result = await runFloodLoad(Number(new URL(s.webhook).port), '/webhooks', connections, bytes, holdMs);
    flooding = false;
    await sampler;
    await sleep(500);
    const after = rssOf(s.child.pid!);
    const g = genuineDelivery('evt_after_flood');
    const res = await fetch(`${s.webhook}/webhooks`, { method: 'POST', headers: g.headers, body: g.body });
    const mib = (n: number): string => (n / 1_048_576).toFixed(1);
    console.log(`webhook flood: ${connections} connections × ${bytes} bytes, held ${holdMs} ms, ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    console.log(`  sidecar RSS: before ${mib(before)} MiB, peak ${mib(peak)} MiB (+${mib(peak - before)} MiB), after ${mib(after)} MiB`);
    console.log(`  hostile answers: ${JSON.stringify(result.statuses)}`);
    console.log(`  readiness probes not 200: ${notReady} of ${probes}`);
    console.log(`  genuine delivery after the flood: ${res.status}; app received ${app.received.length}`);
  } finally {
    s.child.kill('SIGTERM');
    app.server.close();
  }
}

if (process.argv[2] === '--load') {
  const [port, path, connections, bytes, holdMs] = process.argv.slice(3);
  await load(Number(port), path!, Number(connections), Number(bytes), Number(holdMs));
} else if (process.argv[1] === SELF) {
  await main();
}
