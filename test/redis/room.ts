import { vi, expect } from 'vitest';
import { silentLogger } from '../../src/observability/index.js';
import { createRegistry } from '../../src/observability/registry.js';
import { createRedisMetrics, RedisConnection, RedisKeyspace, type RedisCommands, type RedisMetrics, type RedisTargetSpec } from '../../src/redis/index.js';

/** A connection of the Redis room, closed after the test (pushed on `opened`). */
export interface TestConnection {
  readonly conn: RedisConnection;
  readonly metrics: RedisMetrics;
  readonly registry: ReturnType<typeof createRegistry>;
  readonly keyspace: RedisKeyspace;
}

export function connectionTo(
  target: RedisTargetSpec | (() => RedisTargetSpec),
  o: {
    prefix?: string;
    commandTimeoutMs?: number;
    opened: { close(): Promise<void> }[];
    logger?: ReturnType<typeof silentLogger>;
    /** Default 100 ms (a check every 100 ms, whatever else passed). */
    healthIntervalMs?: number;
    quietHealthIntervalMs?: number;
  },
): TestConnection {
  const registry = createRegistry({ defaultMetrics: false });
  const metrics = createRedisMetrics(registry);
  const keyspace = new RedisKeyspace(o.prefix ?? 'test:');
  const conn = new RedisConnection({
    target: typeof target === 'function' ? target : () => target,
    keyspace,
    commandTimeoutMs: o.commandTimeoutMs ?? 500,
    logger: o.logger ?? silentLogger(),
    metrics,
    healthIntervalMs: o.healthIntervalMs ?? 100,
    ...(o.quietHealthIntervalMs !== undefined ? { quietHealthIntervalMs: o.quietHealthIntervalMs } : {}),
  });
  o.opened.push(conn);
  conn.start();
  return { conn, metrics, registry, keyspace };
}

/** Waits until the connection's health check passes. */
export async function up(c: TestConnection, timeout = 10_000): Promise<TestConnection> {
  await vi.waitFor(() => expect(c.conn.isUp).toBe(true), { timeout });
  return c;
}

/** Sum of a metric's values whose labels include `labels`. */
export const count = async (
  c: { get(): Promise<{ values: { value: number; labels: Record<string, unknown> }[] }> },
  labels: Record<string, string> = {},
): Promise<number> => (await c.get()).values.filter((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x)).reduce((s, v) => s + v.value, 0);

export const single = (url: string): RedisTargetSpec => ({ kind: 'single', url });

/** The webhook secret the markers of the dedup tests are keyed from. */
export const DEDUP_TEST_SECRET = 'whsec_dedup_test_secret';

/**
 * One replica's shared dedup on `url` under `prefix`: its own connection and memory store (the
 * store's options, `--redis-wait-replicas` among them, passed through).
 */
export async function dedupReplica(
  url: string,
  prefix: string,
  o: { opened: { close(): Promise<void> }[]; leaseMs?: number; forwardTimeoutMs?: number; commandTimeoutMs?: number; waitUp?: boolean; waitReplicas?: number },
) {
  const { RedisClaimStore } = await import('../../src/redis/index.js');
  const { createSharedDedupMetrics, MarkerMacs, MemoryDedupStore, SharedDedup } = await import('../../src/webhooks/index.js');
  const c = connectionTo(single(url), { prefix, opened: o.opened, commandTimeoutMs: o.commandTimeoutMs ?? 500 });
  if (o.waitUp ?? true) await up(c);
  const metrics = createSharedDedupMetrics(createRegistry({ defaultMetrics: false }));
  const store = new SharedDedup({
    // WAIT's timeout as serve derives it (src/redis/shared-state.ts): just under the command timeout.
    store: new RedisClaimStore(c.conn, c.keyspace, { waitReplicas: o.waitReplicas ?? 0, waitTimeoutMs: Math.max(1, (o.commandTimeoutMs ?? 500) - 100) }),
    local: new MemoryDedupStore({ retentionMs: 60_000, maxEntries: 1000 }),
    leaseMs: o.leaseMs ?? 10_000,
    forwardTimeoutMs: o.forwardTimeoutMs ?? 1,
    retentionMs: 60_000,
    metrics,
    macs: new MarkerMacs(() => [DEDUP_TEST_SECRET]),
    logger: silentLogger(),
    now: Date.now,
  });
  await store.start();
  o.opened.push(store);
  return { store, metrics, conn: c.conn, redisMetrics: c.metrics, key: (id: string) => c.keyspace.key('dedup', id) };
}

/** What a test queue worker may set; each default is the one the Redis queue tests were written for. */
export interface QueueReplicaOptions {
  readonly opened: { close(): Promise<void> }[];
  readonly horizonMs?: number;
  readonly staleConsumerMs?: number;
  readonly secrets?: readonly string[];
  readonly commandTimeoutMs?: number;
  readonly maxEvents?: number;
  readonly visibilityMs?: number;
  readonly forwardTimeoutMs?: number;
  readonly pollIntervalMs?: number;
  readonly now?: () => number;
  /**
   * Routes by event type (`--app-webhook-route`, `--app-webhook-ignore`); with them `appUrl` is the
   * default only when `appUrl` is not ''. Default: every type to `appUrl`.
   */
  readonly routes?: { readonly routes: readonly { readonly glob: string; readonly url: string }[]; readonly ignore?: readonly string[] };
  /** False for a Redis the test is about to stop or freeze: do not wait for its health check. */
  readonly waitUp?: boolean;
}

/**
 * One replica's queue worker on `url` under `prefix`, forwarding to `appUrl`: its own connection,
 * store, app client and registry, started, and closed with `opened`. `setSecrets` swaps the
 * secrets it verifies with (a rotation).
 */
export async function queueReplica(url: string, prefix: string, appUrl: string, o: QueueReplicaOptions) {
  const { RedisQueueStore } = await import('../../src/redis/index.js');
  const { AppClient, AppRoutes, createQueueMetrics, createWebhookMetrics, QueueWorker } = await import('../../src/webhooks/index.js');
  const c = connectionTo(single(url), { prefix, opened: o.opened, commandTimeoutMs: o.commandTimeoutMs ?? 1000 });
  if (o.waitUp !== false) await up(c);
  const registry = createRegistry({ defaultMetrics: false });
  const store = new RedisQueueStore(c.conn, c.keyspace, o.maxEvents !== undefined ? { maxEvents: o.maxEvents } : {});
  let secrets = o.secrets ?? [];
  // The app client is the webhook wing's; the worker's stop leaves it to whoever built it.
  const appClient = new AppClient({ timeoutMs: o.forwardTimeoutMs ?? 1000 });
  const q = new QueueWorker({
    store,
    logger: silentLogger(),
    metrics: createQueueMetrics(registry),
    secrets: () => secrets,
    app: appClient,
    routes: new AppRoutes(
      (o.routes?.routes ?? []).map((r) => ({ glob: r.glob, url: new URL(r.url) })),
      appUrl === '' ? null : new URL(appUrl),
      o.routes?.ignore ?? [],
    ),
    routeForwards: createWebhookMetrics(registry).routeForwards,
    forwardTimeoutMs: o.forwardTimeoutMs ?? 1000,
    visibilityMs: o.visibilityMs ?? 30_000,
    horizonMs: o.horizonMs ?? 60_000,
    toleranceS: 300,
    maxBodyBytes: 1_048_576,
    deliveredRetentionMs: 60_000,
    now: o.now ?? Date.now,
    ...(o.pollIntervalMs === undefined ? {} : { pollIntervalMs: o.pollIntervalMs }),
    ...(o.staleConsumerMs === undefined ? {} : { staleConsumerMs: o.staleConsumerMs }),
  });
  await q.start();
  o.opened.push({ close: () => q.stop().then(() => appClient.destroy()) });
  return { q, store, conn: c.conn, redisMetrics: c.metrics, registry, keys: store.keys, setSecrets: (s: readonly string[]) => (secrets = s) };
}

/** The webhook secret the invalidation log's entries are keyed from in the Redis tests. */
export const INVALIDATION_TEST_SECRET = 'whsec_invalidation_test_secret';

/** What a test replica of the fleet invalidation may set; each default is the one its tests were written for. */
export interface InvalidationReplicaOptions {
  readonly prefix: string;
  readonly opened: { close(): Promise<void> }[];
  readonly maxEntries?: number;
  readonly maxSilenceMs?: number;
  readonly pollIntervalMs?: number;
  /** The read while the subscription is proven up (the default's 30 s unless a test finds entries written without a nudge). */
  readonly quietPollIntervalMs?: number;
  /** False for a Redis the test is about to stop or cannot reach yet: do not wait for its health check. */
  readonly waitUp?: boolean;
  readonly clockSlackMs?: number;
  /** The webhook secrets its entries are sealed and verified with ([] for a replica without any). */
  readonly secrets?: readonly string[];
  /** Tells its own entries apart (a random id by default). */
  readonly replicaId?: string;
  /** What its log sends Redis goes through this (e.g. {@link holdingPublishes}); the connection itself by default. */
  readonly through?: (conn: RedisConnection) => RedisConnection;
  /** Its connection's health check (see {@link connectionTo}). */
  readonly healthIntervalMs?: number;
  readonly quietHealthIntervalMs?: number;
  /** The keep-alive of its proven subscription (default: from `maxSilenceMs`). */
  readonly keepAliveMs?: number;
  /** `--redis-wait-replicas` for its appends (and WAIT's timeout, ms). */
  readonly waitReplicas?: number;
  readonly waitTimeoutMs?: number;
}

/**
 * One replica's fleet invalidation on the real Redis log: its own connection, a cache that records
 * what it was asked to purge (`rec.calls`: `user:<ref>` or `all`), started, and closed with `opened`.
 */
export async function invalidationReplica(target: RedisTargetSpec | (() => RedisTargetSpec), o: InvalidationReplicaOptions) {
  const { CacheTrust, createInvalidationMetrics, FleetInvalidation } = await import('../../src/decision/index.js');
  const { RedisInvalidationLog } = await import('../../src/redis/index.js');
  const { invalidationMacs } = await import('../../src/assembly/fleet.js');
  // A generous deadline: a first read that times out on a busy machine would count as a reset.
  const c = connectionTo(target, {
    prefix: o.prefix,
    opened: o.opened,
    commandTimeoutMs: 2000,
    ...(o.healthIntervalMs !== undefined ? { healthIntervalMs: o.healthIntervalMs } : {}),
    ...(o.quietHealthIntervalMs !== undefined ? { quietHealthIntervalMs: o.quietHealthIntervalMs } : {}),
  });
  if (o.waitUp ?? true) await up(c);
  const calls: string[] = [];
  const hook = { revokeUser: (u: string) => (calls.push(`user:${u}`), 1), revokeAll: () => (calls.push('all'), 2) };
  const metrics = createInvalidationMetrics(createRegistry({ defaultMetrics: false }));
  const trust = new CacheTrust();
  const secrets = o.secrets ?? [INVALIDATION_TEST_SECRET];
  const fleet = new FleetInvalidation({
    log: new RedisInvalidationLog(o.through ? o.through(c.conn) : c.conn, c.keyspace, {
      ...(o.maxEntries !== undefined ? { maxEntries: o.maxEntries } : {}),
      ...(o.waitReplicas !== undefined ? { waitReplicas: o.waitReplicas, waitTimeoutMs: o.waitTimeoutMs ?? 300 } : {}),
    }),
    local: hook,
    macs: invalidationMacs(() => secrets),
    metrics,
    logger: silentLogger(),
    maxSilenceMs: o.maxSilenceMs ?? 5000,
    trust,
    pollIntervalMs: o.pollIntervalMs ?? 200,
    ...(o.quietPollIntervalMs !== undefined ? { quietPollIntervalMs: o.quietPollIntervalMs } : {}),
    ...(o.clockSlackMs !== undefined ? { clockSlackMs: o.clockSlackMs } : {}),
    ...(o.replicaId !== undefined ? { replicaId: o.replicaId } : {}),
    ...(o.keepAliveMs !== undefined ? { keepAliveMs: o.keepAliveMs } : {}),
  });
  await fleet.start();
  o.opened.push({ close: async () => fleet.close() });
  return {
    fleet,
    rec: { calls },
    metrics,
    trust,
    conn: c.conn,
    redisMetrics: c.metrics,
    /** Reads of the log this replica sent (answered or not). */
    reads: () => callsOf(c.metrics, 'invalidate_read'),
    stream: c.keyspace.key('invalidations'),
    channel: c.keyspace.channel('invalidate'),
  };
}

/** How many calls labelled `op` a connection made (its duration histogram's count). */
export async function callsOf(metrics: RedisMetrics, op: string): Promise<number> {
  const values = (await metrics.callDuration.get()).values as { metricName?: string; value: number; labels: Record<string, unknown> }[];
  return values.filter((v) => v.metricName?.endsWith('_count') && v.labels.op === op).reduce((n, v) => n + v.value, 0);
}

/**
 * `conn` as a log sees it, except that every PUBLISH waits in `held` until the test sends it (in
 * the order it likes) or drops it (the call then gets an error, as a publish that failed).
 */
export function holdingPublishes(): { through: (conn: RedisConnection) => RedisConnection; held: { args: readonly string[]; send(): void; drop(): void }[] } {
  const held: { args: readonly string[]; send(): void; drop(): void }[] = [];
  const through = (conn: RedisConnection): RedisConnection =>
    new Proxy(conn, {
      get(target, prop, receiver) {
        if (prop === 'call') {
          return (op: string, work: (c: RedisCommands) => Promise<unknown>, o?: { probe?: boolean }) =>
            target.call(
              op,
              (c) =>
                work({
                  sendCommand: (args) =>
                    args[0] !== 'PUBLISH'
                      ? c.sendCommand(args)
                      : new Promise((resolve, reject) => held.push({ args, send: () => void c.sendCommand(args).then(resolve, reject), drop: () => reject(new Error('publish dropped by the test')) })),
                }),
              o,
            );
        }
        const value: unknown = Reflect.get(target, prop, receiver);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
  return { through, held };
}

/**
 * A Redis of its own with a user `name` (all keys, channels and commands) whose permissions a test
 * then changes (ACL SETUSER), as a writer with ACL rights can; `url` connects as that user.
 */
export async function redisWithUser(name: string, opened: { close(): Promise<void> }[]) {
  const { adminOn, spawnRedisServer } = await import('../helpers/redis.js');
  const own = await spawnRedisServer();
  opened.push({ close: () => own.stop() });
  const admin = await adminOn(own.url);
  opened.push({ close: async () => admin.destroy() });
  await admin.sendCommand(['ACL', 'SETUSER', name, 'on', `>${name}-password`, '~*', '&*', '+@all']);
  return { own, admin, url: `redis://${name}:${name}-password@127.0.0.1:${own.port}` };
}
