/**
 * How long one REDEC reconcile run takes over 10,000 pending obligations against the simulator:
 * the production Reconciler and listing (pages of --redec-reconcile-page-limit), the simulator's
 * listing over loopback, and the app a loopback server answering 200.
 *
 * `node --import tsx test/bench/redec.ts`. BENCH_REDEC_OBLIGATIONS (default 10000),
 * BENCH_REDEC_PAGE_LIMIT (default 100, the flag's default), BENCH_REDEC_ROUNDS (default 3).
 * Redis (for the shared-state rows): REDIS_URL, or a redis-server spawned on a free port.
 *
 * Rows: a run that lists and remembers (nothing due yet), the run that hands every obligation to
 * the app, and a later run where all are already handed; each in memory and on Redis.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { silentLogger } from '../../src/observability/index.js';
import { createRedisMetrics, RedisConnection, RedisKeyspace, RedisRedecState } from '../../src/redis/index.js';
import { createRegistry } from '../../src/observability/registry.js';
import { startSimulator } from '../../src/simulator/index.js';
import { getTestRedis } from '../helpers/redis.js';
import { reconcilerFor, upstreamOf } from '../helpers/redec.js';

const N = Number(process.env.BENCH_REDEC_OBLIGATIONS ?? 10_000);
const PAGE = Number(process.env.BENCH_REDEC_PAGE_LIMIT ?? 100);
const ROUNDS = Number(process.env.BENCH_REDEC_ROUNDS ?? 3);

async function main(): Promise<void> {
  const sim = await startSimulator({ apiKey: 'bench' });
  const seeded = await fetch(`${sim.url}/_simulator/redec/notification-requirements`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ count: N }) });
  if (seeded.status !== 201) throw new Error(`seeding: ${seeded.status}`);
  let handed = 0;
  const app = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      handed++;
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
  const appUrl = `http://127.0.0.1:${(app.address() as AddressInfo).port}/webhooks`;
  const redis = await getTestRedis();
  const conn = new RedisConnection({ target: () => ({ kind: 'single', url: redis.url }), keyspace: new RedisKeyspace(redis.prefix()), commandTimeoutMs: 2000, logger: silentLogger(), metrics: createRedisMetrics(createRegistry({ defaultMetrics: false })) });
  conn.start();
  await new Promise((r) => setTimeout(r, 300));

  const rows: string[] = [];
  for (const store of ['memory', 'redis'] as const) {
    for (let round = 0; round < ROUNDS; round++) {
      let t = Date.now();
      const state = store === 'redis' ? new RedisRedecState({ connection: conn, keyspace: new RedisKeyspace(redis.prefix()), leaseMs: 30_000, holdMs: 1, now: () => t }) : undefined;
      const r = reconcilerFor({
        upstream: upstreamOf(sim.url, 'bench', 10_000),
        appUrl,
        now: () => t,
        logger: silentLogger(),
        graceMs: 60_000,
        pageLimit: PAGE,
        ...(state ? { ledger: state, lease: state } : {}),
      });
      const timed = async (label: string): Promise<void> => {
        const before = handed;
        const t0 = performance.now();
        const outcome = await r.reconciler.runOnce();
        const ms = performance.now() - t0;
        if (outcome !== 'ok') throw new Error(`${store} ${label}: ${outcome}`);
        rows.push(`${store}\t${round}\t${label}\t${ms.toFixed(0)} ms\thanded ${handed - before}`);
        if (state) await new Promise((res) => setTimeout(res, 5)); // the done hold (1 ms) runs out
      };
      await timed('list+remember');
      t += 60_000;
      await timed('list+hand all');
      t += 60_000;
      await timed('list (all handed)');
      await r.close();
    }
  }
  console.log(`one reconcile run over ${N} pending obligations, pages of ${PAGE} (${Math.ceil(N / PAGE)} pages), node ${process.version}`);
  for (const row of rows) console.log(row);
  await conn.close();
  await redis.stop();
  await sim.close();
  app.close();
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
