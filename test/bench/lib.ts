import { spawn, type ChildProcess } from 'node:child_process';
import { connect, createServer, type Socket } from 'node:net';
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

export interface RateResult {
  sent: number;
  errors: number;
  non2xx: number;
  achievedRps: number;
  p50: number;
  p99: number;
  p999: number;
  max: number;
}

/**
 * An open-loop load at a truly fixed rate: request i is due at start + i/rate and its latency is
 * counted from that due time, so a stalled server cannot hide behind a generator that waits for
 * it (no coordinated omission). autocannon's `overallRate` is not usable for this: each connection
 * fires its per-second quota back to back at the start of every second, and its latencies are
 * back-filled against a 1 ms expected interval, so even a bare server shows a p99 of several ms.
 * Raw keep-alive sockets with pre-built request bytes and a minimal response framer keep the
 * generator's own allocations (and so its GC pauses, which would show up as server latency) low.
 * A request due while every connection is busy waits in a queue, and that wait counts.
 */
export async function fixedRate(opts: { url: string; body: string; rate: number; durationS: number; connections: number }): Promise<RateResult> {
  const target = new URL(opts.url);
  const request = Buffer.from(
    `POST ${target.pathname} HTTP/1.1\r\nhost: ${target.host}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(opts.body)}\r\n\r\n${opts.body}`,
  );
  const total = Math.round(opts.rate * opts.durationS);
  const intervalNs = 1e9 / opts.rate;
  const latenciesMs = new Float64Array(total);
  let errors = 0;
  let non2xx = 0;
  let done = 0;
  let start = 0n;
  let resolveAll: () => void = () => undefined;
  const finished = new Promise<void>((r) => (resolveAll = r));

  interface Conn {
    socket: Socket;
    busy: boolean;
    due: number;
    index: number;
    pending: Buffer | null;
  }
  const idle: Conn[] = [];
  const queue: number[] = [];
  const send = (c: Conn, i: number): void => {
    c.busy = true;
    c.index = i;
    c.due = i * intervalNs;
    c.socket.write(request);
  };
  const complete = (c: Conn, ok: boolean, status: number): void => {
    // Warm-up exchanges (before start) are not measured and do not free the connection here.
    if (start === 0n) return;
    if (c.index >= 0) {
      latenciesMs[c.index] = ok ? (Number(process.hrtime.bigint() - start) - c.due) / 1e6 : Number.POSITIVE_INFINITY;
      if (!ok) errors++;
      else if (status < 200 || status > 299) non2xx++;
      if (++done === total) resolveAll();
    }
    c.busy = false;
    c.index = -1;
    const nextIndex = queue.shift();
    if (nextIndex !== undefined) send(c, nextIndex);
    else idle.push(c);
  };
  const onData = (c: Conn, chunk: Buffer): void => {
    let buf = c.pending ? Buffer.concat([c.pending, chunk]) : chunk;
    for (;;) {
      const headerEnd = buf.indexOf('\r\n\r\n');
      if (headerEnd < 0) break;
      const head = buf.toString('latin1', 0, headerEnd);
      const m = /\r\ncontent-length:\s*(\d+)/i.exec(head);
      const end = headerEnd + 4 + (m ? Number(m[1]) : 0);
      if (buf.length < end) break;
      complete(c, true, Number(head.slice(9, 12)));
      buf = buf.subarray(end);
    }
    c.pending = buf.length > 0 ? buf : null;
  };

  const conns = await Promise.all(
    Array.from(
      { length: opts.connections },
      () =>
        new Promise<Conn>((resolve, reject) => {
          const socket = connect(Number(target.port), target.hostname, () => resolve(c));
          socket.setNoDelay(true);
          const c: Conn = { socket, busy: false, due: 0, index: -1, pending: null };
          socket.on('data', (chunk: Buffer) => onData(c, chunk));
          socket.on('error', reject);
        }),
    ),
  );
  // One warm-up exchange per connection (not counted: start is still 0).
  await Promise.all(
    conns.map(
      (c) =>
        new Promise<void>((resolve) => {
          const poll = (): void => {
            if (c.pending === null) resolve();
            else setImmediate(poll);
          };
          c.socket.once('data', () => setImmediate(poll));
          c.socket.write(request);
        }),
    ),
  );
  idle.push(...conns);
  start = process.hrtime.bigint();
  let next = 0;
  const tick = (): void => {
    const elapsed = Number(process.hrtime.bigint() - start);
    while (next < total && next * intervalNs <= elapsed) {
      const i = next++;
      const c = idle.pop();
      if (c) send(c, i);
      else queue.push(i);
    }
    if (next < total) setImmediate(tick);
  };
  tick();
  await finished;
  const elapsedS = Number(process.hrtime.bigint() - start) / 1e9;
  for (const c of conns) c.socket.destroy();
  const sorted = Float64Array.from(latenciesMs).sort();
  const q = (p: number): number => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
  return { sent: total, errors, non2xx, achievedRps: total / elapsedS, p50: q(0.5), p99: q(0.99), p999: q(0.999), max: sorted[sorted.length - 1]! };
}
