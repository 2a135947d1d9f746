import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import autocannon from 'autocannon';

/** A free loopback port (the OS picks, we release it right away). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/** Starts a child process and waits until `readyUrl` answers 200. */
export async function startChild(command: string, args: string[], readyUrl: string): Promise<ChildProcess> {
  const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'inherit'] });
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`${args.join(' ')} exited with ${child.exitCode}`);
    try {
      const res = await fetch(readyUrl);
      if (res.ok) return child;
    } catch {
      // not up yet
    }
    await sleep(50);
  }
  child.kill('SIGKILL');
  throw new Error(`${readyUrl} never became ready`);
}

export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await Promise.race([exited, sleep(5000).then(() => child.kill('SIGKILL'))]);
}

export interface LoadResult {
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
  total: number;
}

/** One autocannon run; the same settings are used for a route and its baseline. */
export async function load(opts: {
  url: string;
  body?: string;
  method?: 'GET' | 'POST';
  connections: number;
  durationS: number;
  overallRate?: number;
  headers?: Record<string, string>;
}): Promise<LoadResult> {
  const r = await autocannon({
    url: opts.url,
    method: opts.method ?? 'POST',
    body: opts.body,
    headers: { 'content-type': 'application/json', ...opts.headers },
    connections: opts.connections,
    duration: opts.durationS,
    ...(opts.overallRate ? { overallRate: opts.overallRate } : {}),
  });
  return {
    rps: r.requests.average,
    p50: r.latency.p50,
    p99: r.latency.p99,
    non2xx: r.non2xx,
    errors: r.errors + r.timeouts,
    total: r.requests.total,
  };
}

export const fmt = (n: number, digits = 0): string => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
