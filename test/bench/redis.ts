/**
 * What shared dedup costs a webhook delivery: latency of one verified delivery through a real
 * `serve` process to a loopback app, with `--redis-url` (claim and accept are one Redis round trip
 * each, on loopback) against the same binary without it (in-memory dedup). Both processes run at
 * once and are measured in alternating rounds, so a neighbour's burst does not land on one side only.
 *
 * `npm run bench:redis` (builds first). BENCH_REDIS_ROUNDS (default 6), BENCH_REDIS_PER_ROUND
 * (default 500 deliveries), BENCH_REDIS_CONCURRENCY (default 1: latency, not throughput).
 * Redis: REDIS_URL, or a redis-server spawned on a free port.
 */
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { replicaFlags, RecordingApp, ServeProcess, signedEvent } from '../helpers/serve-process.js';
import { getTestRedis } from '../helpers/redis.js';

const ROUNDS = Number(process.env.BENCH_REDIS_ROUNDS ?? 6);
const PER_ROUND = Number(process.env.BENCH_REDIS_PER_ROUND ?? 500);
const CONCURRENCY = Number(process.env.BENCH_REDIS_CONCURRENCY ?? 1);

const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

async function round(target: ServeProcess, pool: Pool, tag: string, n: number): Promise<number[]> {
  const times: number[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < n) {
      const i = next++;
      const event = signedEvent(`evt_bench_${tag}_${i}`, i + 1);
      const t0 = performance.now();
      const res = await pool.request({ method: 'POST', path: '/webhooks', headers: event.headers, body: event.body });
      await res.body.dump();
      const ms = performance.now() - t0;
      if (res.statusCode !== 200) throw new Error(`${target.flags['redis-url'] ? 'redis' : 'memory'}: answer ${res.statusCode}`);
      times.push(ms);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return times;
}

async function main(): Promise<void> {
  const redis = await getTestRedis();
  const app = new RecordingApp();
  await app.up();
  const common = { upstreamUrl: 'http://127.0.0.1:9', apiKey: 'bench', appUrl: app.url, redisUrl: redis.url, prefix: redis.prefix() };
  // Default log level (info, one line per accepted event), as deployed.
  const withRedis = new ServeProcess(replicaFlags(common));
  const memoryFlags: Record<string, string> = { ...replicaFlags(common) };
  delete memoryFlags['redis-url'];
  delete memoryFlags['redis-key-prefix'];
  const inMemory = new ServeProcess(memoryFlags);
  await Promise.all([withRedis.start(), inMemory.start()]);
  const pools = { redis: new Pool(withRedis.urls.webhook, { connections: CONCURRENCY }), memory: new Pool(inMemory.urls.webhook, { connections: CONCURRENCY }) };
  const samples = { redis: [] as number[], memory: [] as number[] };
  try {
    await round(withRedis, pools.redis, 'warm-r', 200);
    await round(inMemory, pools.memory, 'warm-m', 200);
    for (let r = 0; r < ROUNDS; r++) {
      // alternate which goes first
      const order = r % 2 === 0 ? (['memory', 'redis'] as const) : (['redis', 'memory'] as const);
      for (const side of order) {
        const target = side === 'redis' ? withRedis : inMemory;
        samples[side].push(...(await round(target, pools[side], `${side}${r}`, PER_ROUND)));
      }
    }
  } finally {
    await Promise.allSettled([pools.redis.close(), pools.memory.close()]);
    await Promise.allSettled([withRedis.stop(), inMemory.stop()]);
    await app.down();
    await redis.stop();
  }
  const row = (name: string, xs: number[]): string =>
    `| ${name} | ${xs.length} | ${pct(xs, 50).toFixed(3)} | ${pct(xs, 90).toFixed(3)} | ${pct(xs, 99).toFixed(3)} |`;
  const lines = [
    `webhook delivery latency (ms), ${CONCURRENCY} at a time, ${ROUNDS} alternating rounds of ${PER_ROUND}; Redis: ${redis.source}`,
    '| dedup | deliveries | p50 | p90 | p99 |',
    '|---|---|---|---|---|',
    row('in memory', samples.memory),
    row('Redis', samples.redis),
    `added by Redis: p50 ${(pct(samples.redis, 50) - pct(samples.memory, 50)).toFixed(3)} ms, p90 ${(pct(samples.redis, 90) - pct(samples.memory, 90)).toFixed(3)} ms, p99 ${(pct(samples.redis, 99) - pct(samples.memory, 99)).toFixed(3)} ms`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}

await main();
