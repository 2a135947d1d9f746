import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import autocannon from 'autocannon';

export { freePort } from '../helpers/ports.js';

/** Starts a child process and waits until `readyUrl` answers 200; its stdout goes to `stdoutFile` when given, else nowhere. */
export async function startChild(command: string, args: string[], readyUrl: string, env?: NodeJS.ProcessEnv, stdoutFile?: string): Promise<ChildProcess> {
  const out = stdoutFile === undefined ? 'ignore' : openSync(stdoutFile, 'a');
  const child = spawn(command, args, { stdio: ['ignore', out, 'inherit'], ...(env ? { env: { ...process.env, ...env } } : {}) });
  if (typeof out === 'number') closeSync(out);
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
  return rawLoadHere({ url: opts.url, bodies: [opts.body], rate: opts.rate, durationS: opts.durationS, connections: opts.connections });
}

export interface RawLoadOptions {
  /** `http://host:port/path`; with `socketPath`, only its path and host header are used. */
  url: string;
  /** A Unix socket to connect to instead of the URL's host and port. */
  socketPath?: string;
  /** Request bodies (POST), sent in turn; `[]` sends GETs. */
  bodies: string[];
  headers?: Record<string, string>;
  /** Requests per second (open loop); 0: closed loop, each connection sends again on each answer. */
  rate: number;
  durationS: number;
  connections: number;
}

/** The open-loop (or closed-loop) raw-socket generator, in this process: see {@link fixedRate}. */
export async function rawLoadHere(opts: RawLoadOptions): Promise<RateResult> {
  const target = new URL(opts.url);
  const extra = Object.entries(opts.headers ?? {})
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  const requests = (opts.bodies.length === 0 ? [null] : opts.bodies).map((body) =>
    Buffer.from(
      body === null
        ? `GET ${target.pathname}${target.search} HTTP/1.1\r\nhost: ${target.host}\r\n${extra}\r\n`
        : `POST ${target.pathname}${target.search} HTTP/1.1\r\nhost: ${target.host}\r\ncontent-type: application/json\r\n${extra}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    ),
  );
  let nextRequest = 0;
  const pick = (): Buffer => requests[nextRequest++ % requests.length]!;
  const closed = opts.rate <= 0;
  const total = closed ? Number.POSITIVE_INFINITY : Math.round(opts.rate * opts.durationS);
  const intervalNs = closed ? 0 : 1e9 / opts.rate;
  const latenciesMs: number[] = [];
  let errors = 0;
  let non2xx = 0;
  let done = 0;
  let start = 0n;
  let stopAt = 0n;
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
  let inFlight = 0;
  const send = (c: Conn, i: number): void => {
    c.busy = true;
    c.index = i;
    c.due = closed ? Number(process.hrtime.bigint() - start) : i * intervalNs;
    inFlight++;
    c.socket.write(pick());
  };
  const complete = (c: Conn, ok: boolean, status: number): void => {
    // Warm-up exchanges (before start) are not measured and do not free the connection here.
    if (start === 0n) return;
    if (c.index >= 0) {
      inFlight--;
      latenciesMs.push(ok ? (Number(process.hrtime.bigint() - start) - c.due) / 1e6 : Number.POSITIVE_INFINITY);
      if (!ok) errors++;
      else if (status < 200 || status > 299) non2xx++;
      done++;
      if (!closed && done === total) resolveAll();
    }
    c.busy = false;
    c.index = -1;
    if (closed) {
      if (process.hrtime.bigint() < stopAt) send(c, done + inFlight);
      else if (inFlight === 0) resolveAll();
      return;
    }
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
          const socket = opts.socketPath ? connect(opts.socketPath, () => resolve(c)) : connect(Number(target.port), target.hostname, () => resolve(c));
          if (!opts.socketPath) socket.setNoDelay(true);
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
          c.socket.write(pick());
        }),
    ),
  );
  start = process.hrtime.bigint();
  stopAt = start + BigInt(Math.round(opts.durationS * 1e9));
  if (closed) {
    for (const c of conns) send(c, done + inFlight);
  } else {
    idle.push(...conns);
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
  }
  await finished;
  const elapsedS = Number(process.hrtime.bigint() - start) / 1e9;
  for (const c of conns) c.socket.destroy();
  const sorted = Float64Array.from(latenciesMs).sort();
  const q = (p: number): number => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
  return { sent: done, errors, non2xx, achievedRps: done / elapsedS, p50: q(0.5), p99: q(0.99), p999: q(0.999), max: sorted[sorted.length - 1]! };
}

// ---------------------------------------------------------------------------------------------
// The honest harness (issue 14): the load generator is never in the process that measures, wrk
// where it is installed (else autocannon in a child process), every figure a ratio against its
// baseline measured in the same run with alternating rounds, plus the server's CPU time per
// request from /proc (far steadier than req/s on a shared machine).

const GEN = new URL('./gen.ts', import.meta.url).pathname;
const WRK = ['/usr/bin/wrk', '/usr/local/bin/wrk'].find((p) => existsSync(p)) ?? null;
const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/** Which closed-loop generator runs: `wrk` or `autocannon` (in a child process). */
export const LOAD_GENERATOR = process.env.BENCH_GENERATOR === 'autocannon' || !WRK ? 'autocannon' : 'wrk';

/** CPU seconds (user + system) a process has used so far, from /proc, or NaN. */
export function cpuSecondsOf(pid: number | undefined): number {
  if (pid === undefined) return Number.NaN;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
  } catch {
    return Number.NaN;
  }
}

/** Runs a command to its end and returns its stdout. */
export function runToEnd(command: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${command} ${args.slice(0, 3).join(' ')} exited with ${code}: ${out.slice(-500)}`))));
  });
}

const luaString = (s: string): string => `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n').replace(/\r/g, '\\r')}"`;

/** The JSON line every wrk run prints from its `done` hook. */
const WRK_DONE = `
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRKJSON {"requests":%d,"durationUs":%d,"status":%d,"errors":%d,"p50":%f,"p99":%f}\\n',
    summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
`;

export interface Target {
  url: string;
  method?: 'GET' | 'POST';
  body?: string;
  headers?: Record<string, string>;
  /**
   * A file of pre-built requests for wrk (one per line: `headerName: value` pairs joined by TAB,
   * then TAB and the body), each sent once in turn; not supported by the autocannon fallback.
   */
  requestFile?: string;
}

/** One closed-loop run (max throughput) with the configured generator, in its own process. */
export async function closedLoop(t: Target, connections: number, durationS: number): Promise<LoadResult> {
  if (LOAD_GENERATOR === 'wrk') {
    const dir = mkdtempSync(join(tmpdir(), 'bench-wrk-'));
    const script = join(dir, 'script.lua');
    const headers = { 'content-type': 'application/json', ...t.headers };
    let lua = `wrk.method = "${t.method ?? 'POST'}"\n`;
    if (t.body !== undefined) lua += `wrk.body = ${luaString(t.body)}\n`;
    for (const [k, v] of Object.entries(headers)) lua += `wrk.headers[${luaString(k)}] = ${luaString(v)}\n`;
    if (t.requestFile) {
      const path = new URL(t.url).pathname;
      lua += `
local reqs = {}
local counter = 0
setup = function(thread) thread:set("id", counter); counter = counter + 1 end
init = function(args)
  for line in io.lines(${luaString(t.requestFile)}) do
    local fields = {}
    for f in string.gmatch(line, "[^\\t]+") do fields[#fields + 1] = f end
    local h = { ["content-type"] = "application/json" }
    for i = 1, #fields - 1 do
      local k, v = string.match(fields[i], "^([^:]+): (.*)$")
      h[k] = v
    end
    reqs[#reqs + 1] = wrk.format("POST", ${luaString(path)}, h, fields[#fields])
  end
  i = id + 1
end
request = function()
  local r = reqs[i]
  i = i + ${WRK_THREADS}
  if i > #reqs then i = ((i - 1) % #reqs) + 1 end
  return r
end
`;
    }
    writeFileSync(script, lua + WRK_DONE);
    try {
      const out = await runToEnd(WRK!, ['-t', String(WRK_THREADS), '-c', String(connections), '-d', `${durationS}s`, '--timeout', '10s', '-s', script, t.url]);
      const line = out.split('\n').find((l) => l.startsWith('WRKJSON '));
      if (!line) throw new Error(`wrk printed no result: ${out}`);
      const r = JSON.parse(line.slice(8)) as { requests: number; durationUs: number; status: number; errors: number; p50: number; p99: number };
      return { rps: r.requests / (r.durationUs / 1e6), p50: r.p50, p99: r.p99, non2xx: r.status, errors: r.errors, total: r.requests };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  if (t.requestFile) throw new Error('pre-built request files need wrk (apt-get install wrk)');
  const out = await runToEnd(process.execPath, ['--import', 'tsx', GEN, 'autocannon', JSON.stringify({ url: t.url, method: t.method, body: t.body, headers: t.headers, connections, durationS })]);
  return JSON.parse(out.trim().split('\n').pop()!) as LoadResult;
}

const WRK_THREADS = Number(process.env.BENCH_WRK_THREADS ?? 1);

/** Our raw-socket generator in its own process: open loop at a fixed rate, or closed loop. */
export async function rawLoad(opts: RawLoadOptions): Promise<RateResult> {
  const out = await runToEnd(process.execPath, ['--import', 'tsx', GEN, 'raw', JSON.stringify(opts)]);
  return JSON.parse(out.trim().split('\n').pop()!) as RateResult;
}

export interface Round<R> {
  baseline: R;
  subject: R;
  /** Server CPU µs per request (NaN without /proc). */
  baselineCpuUs: number;
  subjectCpuUs: number;
}

export interface Comparison {
  name: string;
  baselineName: string;
  subjectName: string;
  /** Median over rounds of subject req/s ÷ baseline req/s. */
  ratio: number;
  roundRatios: number[];
  /** Baseline CPU per request ÷ subject CPU per request (higher is better, like `ratio`). */
  cpuRatio: number;
  baseline: { rps: number; p50: number; p99: number; cpuUsPerRequest: number };
  subject: { rps: number; p50: number; p99: number; cpuUsPerRequest: number };
  bad: number;
  target?: number;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : s.length % 2 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/**
 * Baseline and subject in alternating rounds (B S, S B, B S, ...), each run with the same load
 * settings; `pids` are the server processes whose CPU is charged to each side (e.g. the sidecar,
 * or the forwarder; an upstream both share is left out of both).
 */
export async function compare(o: {
  name: string;
  baselineName: string;
  subjectName: string;
  baseline: () => Promise<LoadResult>;
  subject: () => Promise<LoadResult>;
  baselinePids: (number | undefined)[];
  subjectPids: (number | undefined)[];
  rounds: number;
  target?: number;
}): Promise<Comparison> {
  const cpu = (pids: (number | undefined)[]): number => pids.reduce<number>((a, p) => a + cpuSecondsOf(p), 0);
  const rounds: Round<LoadResult>[] = [];
  for (let r = 0; r < o.rounds; r++) {
    const run = async (which: 'b' | 's'): Promise<[LoadResult, number]> => {
      const pids = which === 'b' ? o.baselinePids : o.subjectPids;
      const c0 = cpu(pids);
      const res = await (which === 'b' ? o.baseline() : o.subject());
      return [res, ((cpu(pids) - c0) * 1e6) / Math.max(1, res.total)];
    };
    let b: [LoadResult, number];
    let s: [LoadResult, number];
    if (r % 2 === 0) {
      b = await run('b');
      s = await run('s');
    } else {
      s = await run('s');
      b = await run('b');
    }
    rounds.push({ baseline: b[0], subject: s[0], baselineCpuUs: b[1], subjectCpuUs: s[1] });
  }
  const side = (pick: (x: Round<LoadResult>) => LoadResult, cpuOf: (x: Round<LoadResult>) => number) => ({
    rps: median(rounds.map((x) => pick(x).rps)),
    p50: median(rounds.map((x) => pick(x).p50)),
    p99: median(rounds.map((x) => pick(x).p99)),
    cpuUsPerRequest: median(rounds.map(cpuOf)),
  });
  const baseline = side((x) => x.baseline, (x) => x.baselineCpuUs);
  const subject = side((x) => x.subject, (x) => x.subjectCpuUs);
  const roundRatios = rounds.map((x) => x.subject.rps / x.baseline.rps);
  return {
    name: o.name,
    baselineName: o.baselineName,
    subjectName: o.subjectName,
    ratio: median(roundRatios),
    roundRatios,
    cpuRatio: baseline.cpuUsPerRequest / subject.cpuUsPerRequest,
    baseline,
    subject,
    bad: rounds.reduce((a, x) => a + x.baseline.non2xx + x.baseline.errors + x.subject.non2xx + x.subject.errors, 0),
    ...(o.target !== undefined ? { target: o.target } : {}),
  };
}

/** The lines `npm run bench` prints for one comparison. */
export function comparisonLines(c: Comparison): string[] {
  const l = (name: string, x: Comparison['baseline']): string =>
    `  ${name.padEnd(34)} ${fmt(x.rps).padStart(8)} req/s   p50 ${fmt(x.p50, 2)} ms   p99 ${fmt(x.p99, 2)} ms   CPU ${fmt(x.cpuUsPerRequest, 1)} µs/req`;
  return [
    c.name,
    l(c.baselineName, c.baseline),
    l(c.subjectName, c.subject),
    `  ratio ${fmt(c.ratio, 2)} (rounds ${c.roundRatios.map((x) => fmt(x, 2)).join(', ')})${c.target !== undefined ? ` target >= ${c.target}` : ''}; CPU-per-request ratio ${fmt(c.cpuRatio, 2)}${c.bad ? `; ${c.bad} non-2xx or errors!` : ''}`,
  ];
}

/** Load average and CPU count, to say how loaded the machine was while measuring. */
export function machineLine(): string {
  const [l1, l5] = loadavg();
  return `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, load average ${l1!.toFixed(2)} (1 min) ${l5!.toFixed(2)} (5 min), Node ${process.version}, generator ${LOAD_GENERATOR}`;
}
