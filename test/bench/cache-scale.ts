/**
 * The cache at scale: two sidecars (test/bench/cache-server.ts), one holding 1,000 ALLOWs and one
 * holding BENCH_CACHE_ENTRIES (1,000,000), hit at a light fixed rate by our open-loop generator
 * (its own process; 1,000 different cached keys in turn) in alternating rounds, while /metrics
 * is scraped every 250 ms. Then a purge of everything (DELETE /sidecar/cache) on each. Each server
 * reports its event loop's longest stall over the measured part (monitorEventLoopDelay).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { configOf, userOf } from './cache-server.js';
import { fmt, freePort, rawLoad, type RateResult } from './lib.js';

const SERVER = new URL('./cache-server.ts', import.meta.url).pathname;
const ENTRIES = Number(process.env.BENCH_CACHE_ENTRIES ?? 1_000_000);
const RATE = Number(process.env.BENCH_CACHE_RATE ?? 500);
const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

interface Server {
  child: ChildProcess;
  port: number;
  admin: number;
  entries: number;
  out: string;
}

async function start(entries: number, upstreamUrl: string): Promise<Server> {
  const [port, admin] = [await freePort(), await freePort()];
  const child = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', SERVER, String(entries), upstreamUrl, String(port), String(admin)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const s: Server = { child, port, admin, entries, out: '' };
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (c: Buffer) => {
      s.out += c.toString();
      if (s.out.includes('ready')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`cache-server exited with ${code}`)));
  });
  return s;
}

interface Stall {
  stall: number;
  busy: number;
}

/** Sends `signal` and reads the `stall .. busy ..` line the server prints for the phase that ends. */
async function stallOf(s: Server, signal: 'SIGUSR1' | 'SIGTERM'): Promise<Stall> {
  const from = s.out.length;
  const exited = signal === 'SIGTERM' ? new Promise<void>((r) => s.child.once('exit', () => r())) : null;
  s.child.kill(signal);
  const deadline = Date.now() + 10_000;
  let m: RegExpExecArray | null = null;
  while (!(m = /stall ([\d.]+) busy ([\d.]+)/.exec(s.out.slice(from))) && Date.now() < deadline) await sleep(20);
  await exited;
  return { stall: Number(m?.[1] ?? Number.NaN), busy: Number(m?.[2] ?? Number.NaN) };
}

const stop = (s: Server): Promise<Stall> => stallOf(s, 'SIGTERM');

export interface CacheScaleResult {
  entries: number;
  rate: number;
  hitP99Ms: { small: number; large: number; ratio: number };
  hitP50Ms: { small: number; large: number };
  hitMaxMs: { small: number; large: number };
  scrapeMaxMs: { small: number; large: number };
  /** While hit and scraped (the rounds). */
  maxEventLoopStallMs: { small: number; large: number };
  /** The longest stall spent working (CPU time in the gap), which other processes cannot inflate. */
  maxBusyStallMs: { small: number; large: number };
  revokeAllMs: { small: number; large: number };
  /** From the purge of everything to 2 s later, hits going on (the old store's garbage is freed then). */
  afterPurgeStallMs: { small: number; large: number };
  afterPurgeBusyStallMs: { small: number; large: number };
}

export async function benchCacheAtScale(): Promise<CacheScaleResult> {
  // No upstream call happens (every key asked is cached); the URL only has to parse.
  const upstreamUrl = 'http://127.0.0.1:9';
  const small = await start(1000, upstreamUrl);
  const large = await start(ENTRIES, upstreamUrl).catch(async (err: unknown) => {
    await stop(small);
    throw err;
  });
  try {
    const bodies = (n: number) => Array.from({ length: 1000 }, (_, j) => {
      const i = Math.floor((j * n) / 1000);
      return JSON.stringify({ userReference: userOf(i), configKey: configOf(i) });
    });
    const runs = { small: [] as RateResult[], large: [] as RateResult[] };
    const scrapes = { small: 0, large: 0 };
    const measure = async (s: Server, which: 'small' | 'large'): Promise<void> => {
      let scraping = true;
      const scraper = (async () => {
        while (scraping) {
          const t0 = performance.now();
          const res = await request(`http://127.0.0.1:${s.admin}/metrics`);
          const text = await res.body.text();
          scrapes[which] = Math.max(scrapes[which], performance.now() - t0);
          if (!text.includes('consent_sidecar_cache_entries')) throw new Error('no cache gauge');
          await sleep(250);
        }
      })();
      runs[which].push(await rawLoad({ url: `http://127.0.0.1:${s.port}/v1/authorization/check`, bodies: bodies(s.entries), rate: RATE, durationS: DURATION_S, connections: 8 }));
      scraping = false;
      await scraper;
    };
    // Warm-up (hits and a few scrapes: the first scrape compiles the exposition code, once in a
    // process's life), then reset the stall monitors.
    for (const s of [small, large]) {
      for (let i = 0; i < 5; i++) await (await request(`http://127.0.0.1:${s.admin}/metrics`)).body.text();
      await rawLoad({ url: `http://127.0.0.1:${s.port}/v1/authorization/check`, bodies: bodies(s.entries), rate: RATE, durationS: 1, connections: 8 });
    }
    small.child.kill('SIGUSR2');
    large.child.kill('SIGUSR2');
    for (let r = 0; r < ROUNDS; r++) {
      if (r % 2 === 0) {
        await measure(small, 'small');
        await measure(large, 'large');
      } else {
        await measure(large, 'large');
        await measure(small, 'small');
      }
    }
    const purge = async (s: Server): Promise<number> => {
      const t0 = performance.now();
      const res = await request(`http://127.0.0.1:${s.port}/sidecar/cache`, { method: 'DELETE' });
      const body = (await res.body.json()) as { purged: number };
      const ms = performance.now() - t0;
      if (body.purged < s.entries * 0.99) throw new Error(`purged ${body.purged} of ${s.entries}`);
      return ms;
    };
    // The rounds' stalls end here; the purge and what follows it are a phase of their own.
    const [a, b] = [await stallOf(small, 'SIGUSR1'), await stallOf(large, 'SIGUSR1')];
    const afterPurge = async (s: Server): Promise<number> => {
      const ms = await purge(s);
      await rawLoad({ url: `http://127.0.0.1:${s.port}/v1/authorization/check`, bodies: bodies(s.entries), rate: RATE, durationS: 2, connections: 8 });
      return ms;
    };
    const revokeAllMs = { small: await afterPurge(small), large: await afterPurge(large) };
    const bad = [...runs.small, ...runs.large].reduce((a, r) => a + r.non2xx + r.errors, 0);
    if (bad > 0) throw new Error(`${bad} non-2xx answers or errors`);
    const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
    const p99 = { small: med(runs.small.map((r) => r.p99)), large: med(runs.large.map((r) => r.p99)) };
    const [c, d] = [await stop(small), await stop(large)];
    return {
      entries: ENTRIES,
      rate: RATE,
      hitP99Ms: { ...p99, ratio: p99.large / p99.small },
      hitP50Ms: { small: med(runs.small.map((r) => r.p50)), large: med(runs.large.map((r) => r.p50)) },
      hitMaxMs: { small: Math.max(...runs.small.map((r) => r.max)), large: Math.max(...runs.large.map((r) => r.max)) },
      scrapeMaxMs: scrapes,
      maxEventLoopStallMs: { small: a.stall, large: b.stall },
      maxBusyStallMs: { small: a.busy, large: b.busy },
      revokeAllMs,
      afterPurgeStallMs: { small: c.stall, large: d.stall },
      afterPurgeBusyStallMs: { small: c.busy, large: d.busy },
    };
  } finally {
    if (small.child.exitCode === null) small.child.kill('SIGKILL');
    if (large.child.exitCode === null) large.child.kill('SIGKILL');
  }
}

export function cacheScaleLines(r: CacheScaleResult): string[] {
  return [
    `The cache at ${fmt(r.entries)} entries vs 1,000 (hits at ${r.rate} req/s open loop, /metrics scraped every 250 ms, alternating rounds)`,
    `  hit p50 ${fmt(r.hitP50Ms.small, 3)} ms vs ${fmt(r.hitP50Ms.large, 3)} ms; p99 ${fmt(r.hitP99Ms.small, 3)} ms vs ${fmt(r.hitP99Ms.large, 3)} ms: ratio ${fmt(r.hitP99Ms.ratio, 2)} (target <= 2); max ${fmt(r.hitMaxMs.small, 1)} vs ${fmt(r.hitMaxMs.large, 1)} ms`,
    `  longest event-loop stall while hit and scraped ${fmt(r.maxEventLoopStallMs.small, 1)} ms vs ${fmt(r.maxEventLoopStallMs.large, 1)} ms, of which spent working ${fmt(r.maxBusyStallMs.small, 1)} vs ${fmt(r.maxBusyStallMs.large, 1)} ms (target < 20); slowest /metrics scrape ${fmt(r.scrapeMaxMs.small, 1)} vs ${fmt(r.scrapeMaxMs.large, 1)} ms`,
    `  purge of everything (DELETE /sidecar/cache, round trip) ${fmt(r.revokeAllMs.small, 2)} ms vs ${fmt(r.revokeAllMs.large, 2)} ms; longest stall in the 2 s after it (hits going on, the old store freed) ${fmt(r.afterPurgeStallMs.small, 1)} vs ${fmt(r.afterPurgeStallMs.large, 1)} ms, of which spent working ${fmt(r.afterPurgeBusyStallMs.small, 1)} vs ${fmt(r.afterPurgeBusyStallMs.large, 1)} ms`,
  ];
}
