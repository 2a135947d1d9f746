import type { Command } from 'commander';
import { redisSecrets, resolveRedisConfig, resolveWebhookMaxBodyBytes, resolveWebhookSecrets, SERVE_OPTIONS, type RedisConfig } from '../config/index.js';
import { silentLogger } from '../observability/index.js';
import type { RedisError } from '../redis/index.js';
import { createRegistry } from '../observability/index.js';
import { deadLetterBounds, listDeadLetters, replayDeadLetters, type DeadLetter, type QueueStore } from '../webhooks/index.js';
import { CliUsageError, EXIT } from './errors.js';
import { addSpecOptions, rawFlags, warnUnknownVariables } from './spec-options.js';
import { printable } from '../lib/printable.js';

/** The `serve` flags these commands share: where the queue is. */
const REDIS_OPTION_NAMES = [
  'redis-url',
  'redis-url-file',
  'redis-cluster-nodes',
  'redis-cluster-nodes-file',
  'redis-sentinels',
  'redis-sentinels-file',
  'redis-sentinel-master',
  'redis-tls-ca-file',
  'redis-key-prefix',
  'redis-command-timeout-ms',
];
const REDIS_OPTIONS = SERVE_OPTIONS.filter((o) => REDIS_OPTION_NAMES.includes(o.name));
/** `replay` verifies each dead letter again: it needs serve's webhook secrets. */
const SECRET_OPTIONS = SERVE_OPTIONS.filter((o) => o.name === 'webhook-secret' || o.name === 'webhook-secret-file');
/** Serve's body limit: no dead letter larger than such a body stored is read (it is listed by its size). */
const BODY_OPTIONS = SERVE_OPTIONS.filter((o) => o.name === 'webhook-max-body-bytes');
const OUTPUTS = ['table', 'json'] as const;
/** What the Redis flags mean for these one-shot commands (serve's texts are about a running sidecar). */
const ONE_SHOT_REDIS_MEANING: Readonly<Record<string, string>> = {
  'redis-url': "the Redis the sidecars use (serve's --redis-url); redis:// or rediss:// (TLS)",
  'redis-url-file': 'file holding the Redis URL (read once)',
  'redis-cluster-nodes-file': 'file holding the cluster seed nodes (read once)',
  'redis-sentinels-file': 'file holding the sentinels (read once)',
  'redis-tls-ca-file': 'PEM of a private CA to trust for rediss://',
  'redis-key-prefix': "serve's --redis-key-prefix, to find its queue",
  'redis-command-timeout-ms': 'deadline of every Redis call (at least 5000 here: a page of dead letters can be large)',
};
/** A one-shot command waits this long for Redis to answer before giving up (ms). */
const CONNECT_WAIT_MS = 5000;
/** Per-call deadline floor for the one-shot commands: a page of dead letters can be large (ms). */
const ONE_SHOT_CALL_MS = 5000;

async function withQueue<T>(redis: RedisConfig, work: (store: QueueStore) => Promise<T>): Promise<T> {
  // The Redis client is loaded by these commands alone, not by every command of the CLI.
  const { createRedisMetrics, RedisConnection, RedisError, RedisKeyspace, RedisQueueStore, redisTargetOf } = await import('../redis/index.js');
  const keyspace = new RedisKeyspace(redis.keyPrefix);
  const conn = new RedisConnection({
    target: () => redisTargetOf(redis),
    keyspace,
    commandTimeoutMs: Math.max(redis.commandTimeoutMs, ONE_SHOT_CALL_MS),
    logger: silentLogger(),
    metrics: createRedisMetrics(createRegistry({ defaultMetrics: false })),
    healthIntervalMs: 100,
  });
  conn.start();
  try {
    const until = Date.now() + CONNECT_WAIT_MS;
    while (!conn.isUp && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    if (!conn.isUp) throw new RedisError('ERR_REDIS_UNAVAILABLE', `Redis did not answer within ${CONNECT_WAIT_MS} ms`);
    const store = new RedisQueueStore(conn, keyspace);
    // A wrong prefix (or a Redis the sidecars never used) must not read as "nothing to worry about".
    if (!(await store.exists())) throw new NoQueueError(redis.keyPrefix);
    return await work(store);
  } finally {
    for (const s of redisSecrets(redis)) s.close();
    await conn.close();
  }
}

/** A failure of Redis (its class is not loaded until a command needs Redis). */
function isRedisError(err: unknown): err is RedisError {
  return (err as { name?: unknown } | null)?.name === 'RedisError';
}

class NoQueueError extends Error {
  constructor(prefix: string) {
    super(`no queue under --redis-key-prefix "${prefix}" in this Redis: is the prefix the one serve uses, and does serve run with --webhook-delivery queue?`);
  }
}

/** `3d4h`, `2h5m`, `4m10s`, `12s`. */
export function formatAge(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  const [d, h, m] = [Math.floor(s / 86_400), Math.floor((s % 86_400) / 3600), Math.floor((s % 3600) / 60)];
  if (d > 0) return `${d}d${h}h`;
  if (h > 0) return `${h}h${m}m`;
  if (m > 0) return `${m}m${s % 60}s`;
  return `${s}s`;
}

/** A plain table: ID, TYPE, ATTEMPTS, LAST ERROR, AGE (since the event was accepted). */
export function formatDeadLetters(letters: readonly DeadLetter[], now: number): string {
  // What Redis holds is data from outside (event ids, types, errors): printed with controls escaped.
  const rows = [['ID', 'TYPE', 'ATTEMPTS', 'LAST ERROR', 'AGE'], ...letters.map((l) => [printable(l.id), printable(l.type), String(l.attempts), printable(l.lastError), formatAge(now - l.acceptedAt)])];
  const widths = rows[0]!.map((_c, k) => Math.max(...rows.map((r) => r[k]!.length)));
  return rows.map((r) => r.map((v, k) => v.padEnd(widths[k]!)).join('  ').trimEnd()).join('\n');
}

function failed(what: string, err: unknown): void {
  if (err instanceof NoQueueError) {
    process.stderr.write(`consent-sidecar: webhook dead-letters ${what}: ${err.message}\n`);
    process.exitCode = EXIT.failure;
    return;
  }
  if (!isRedisError(err)) throw err;
  process.stderr.write(`consent-sidecar: webhook dead-letters ${what}: ${err.message} (${err.code})\n`);
  process.exitCode = EXIT.failure;
}

/**
 * `webhook dead-letters list|replay`: the events of queue mode that ran past
 * `--webhook-queue-horizon-ms`, read from the Redis the sidecars use.
 *
 * @example
 * consent-sidecar webhook dead-letters list --redis-url-file /etc/redis/url
 * consent-sidecar webhook dead-letters replay --id evt_1 --id evt_2 --redis-url redis://redis:6379
 */
export function registerDeadLetters(webhook: Command): void {
  const dl = webhook.command('dead-letters').description('queue mode: list or replay the events retried, or left unrouted, past the horizon');

  const list = dl
    .command('list')
    .description('list dead letters, oldest first: id, type, attempts, last error, age')
    .option('--output <format>', OUTPUTS.join(' or '), 'table')
    .action(async (flags: { output: string }) => {
      warnUnknownVariables();
      if (!(OUTPUTS as readonly string[]).includes(flags.output)) throw new CliUsageError(`--output: must be table or json, got "${flags.output}"`);
      const redis = resolveRedisConfig(rawFlags(list, REDIS_OPTIONS));
      const bounds = deadLetterBounds(resolveWebhookMaxBodyBytes(rawFlags(list, BODY_OPTIONS)));
      try {
        const letters = await withQueue(redis, (store) => listDeadLetters(store, bounds));
        const now = Date.now();
        if (flags.output === 'json') {
          for (const l of letters) process.stdout.write(`${JSON.stringify({ ...l, ageS: Math.floor((now - l.acceptedAt) / 1000) })}\n`);
        } else {
          process.stdout.write(letters.length > 0 ? `${formatDeadLetters(letters, now)}\n` : 'no dead letters\n');
        }
      } catch (err) {
        failed('list', err);
      }
    });
  addSpecOptions(list, [...REDIS_OPTIONS, ...BODY_OPTIONS], ONE_SHOT_REDIS_MEANING);

  const replay = dl
    .command('replay')
    .description('put dead letters back on the queue (fresh horizon): those of --id, or --all')
    .option('--id <event id>', 'event id to replay; repeat', (v: string, prev: string[] | undefined) => [...(prev ?? []), v])
    .option('--all', 'replay every dead letter')
    .action(async (flags: { id?: string[]; all?: boolean }) => {
      warnUnknownVariables();
      const ids = flags.id ?? [];
      if (ids.length > 0 && flags.all) throw new CliUsageError('--id: give event ids or --all, not both');
      if (ids.length === 0 && !flags.all) throw new CliUsageError('--id: give the event ids to replay (--id ID, repeatable) or --all');
      const redis = resolveRedisConfig(rawFlags(replay, REDIS_OPTIONS));
      const bounds = deadLetterBounds(resolveWebhookMaxBodyBytes(rawFlags(replay, BODY_OPTIONS)));
      const secrets = resolveWebhookSecrets(rawFlags(replay, SECRET_OPTIONS));
      try {
        const result = await withQueue(redis, (store) => replayDeadLetters(store, flags.all ? { all: true } : { ids }, secrets.current(), Date.now(), bounds));
        process.stdout.write(`replayed ${result.replayed.length}${result.replayed.length > 0 ? `: ${result.replayed.join(' ')}` : ''}\n`);
        if (result.notVerified.length > 0) {
          process.stderr.write(
            `consent-sidecar: left as dead letters, they do not verify against the secrets given or carry no replay mark (parked as expired or signature_mismatch, which are never forwarded; altered or added in Redis; parked by an older version; or signed with a secret no longer given): ${result.notVerified.join(' ')}\n`,
          );
          process.exitCode = EXIT.failure;
        }
        if (result.delivered.length > 0) {
          process.stderr.write(`consent-sidecar: left as dead letters, the app has had them (their delivered marker stands): ${result.delivered.join(' ')}\n`);
          process.exitCode = EXIT.failure;
        }
        if (result.notFound.length > 0) {
          process.stderr.write(`consent-sidecar: not dead letters: ${result.notFound.join(' ')}\n`);
          process.exitCode = EXIT.failure;
        }
      } catch (err) {
        failed('replay', err);
      } finally {
        secrets.close();
      }
    });
  addSpecOptions(replay, [...REDIS_OPTIONS, ...SECRET_OPTIONS, ...BODY_OPTIONS], ONE_SHOT_REDIS_MEANING);
}
