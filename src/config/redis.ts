import { ConfigError } from './errors.js';
import type { OptionSpec } from './option-spec.js';
import { Reader, type RawEnv, type RawFlags } from './reader.js';
import { fileSecret, type Secret, type SecretParser } from './secret.js';

// Several replicas: where Redis is (one server, a cluster, or Sentinel), TLS, the key prefix.

/** Prefix of every Redis key and channel, so several deployments can share one Redis. */
export const DEFAULT_REDIS_KEY_PREFIX = 'consent-sidecar:';
/** Deadline of every Redis call (ms); beyond it the outcome of the call is unknown (a dedup claim answers 503). */
export const DEFAULT_REDIS_COMMAND_TIMEOUT_MS = 500;
/**
 * How long a replica may go without reading the fleet's invalidation log while Redis answers other
 * commands before its cache serves nothing (ms): five polls of the log.
 */
export const DEFAULT_FLEET_INVALIDATION_MAX_SILENCE_MS = 5000;

export const REDIS_OPTIONS: readonly OptionSpec[] = [
  {
    name: 'redis-url',
    arg: '<url>',
    description: 'one Redis for state shared by replicas (dedup, invalidations, queue); redis:// or rediss:// (TLS), credentials in the URL',
    secret: true,
  },
  { name: 'redis-url-file', arg: '<path>', description: 'file holding the Redis URL (credentials inside); re-read when it changes' },
  {
    name: 'redis-cluster-nodes',
    arg: '<urls>',
    description: 'a Redis Cluster instead: seed nodes, comma-separated host:port or redis[s]:// URLs (credentials in the first)',
    secret: true,
  },
  { name: 'redis-cluster-nodes-file', arg: '<path>', description: 'file holding the cluster seed nodes; re-read when it changes' },
  {
    name: 'redis-sentinels',
    arg: '<urls>',
    description: 'a Sentinel-managed Redis instead: the sentinels, comma-separated host:port or redis[s]:// URLs (credentials in the first serve sentinels and master)',
    secret: true,
  },
  { name: 'redis-sentinels-file', arg: '<path>', description: 'file holding the sentinels; re-read when it changes' },
  { name: 'redis-sentinel-master', arg: '<name>', description: 'with --redis-sentinels: the name the sentinels monitor the master under' },
  { name: 'redis-tls-ca-file', arg: '<path>', description: 'PEM of a private CA to trust for rediss:// (default: the system CAs); re-read when it changes' },
  {
    name: 'redis-wait-replicas',
    arg: '<n>',
    description:
      'queue mode, passthrough dedup and shared revocations: count only what this many Redis replicas hold (WAIT); as many as the master has, or a failover may promote one that missed it',
    defaultText: '0',
  },
  {
    name: 'fleet-invalidation-max-silence-ms',
    arg: '<ms>',
    description: 'a replica that could not read the invalidation log this long while Redis answers other commands serves nothing from its cache until it has caught up',
    defaultText: String(DEFAULT_FLEET_INVALIDATION_MAX_SILENCE_MS),
  },
  { name: 'redis-key-prefix', arg: '<prefix>', description: 'prefix of every Redis key and channel', defaultText: DEFAULT_REDIS_KEY_PREFIX },
  {
    name: 'redis-command-timeout-ms',
    arg: '<ms>',
    description: 'deadline of every Redis call',
    defaultText: String(DEFAULT_REDIS_COMMAND_TIMEOUT_MS),
  },
];

/** `redis://` or `rediss://`; the message never repeats the URL (it may hold a password). */
export const parseRedisUrl: SecretParser<URL> = (text) => {
  const trimmed = text.trim();
  let url: URL;
  try {
    url = new URL(trimmed);
  } catch {
    return { error: 'is not a valid URL (expected redis://[user:password@]host:port or rediss://…)' };
  }
  // Not quoted: without `//` what looks like a scheme may be a user name (`user:password@host`).
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') return { error: 'must be a redis:// or rediss:// URL (the value is not quoted: it may hold credentials)' };
  // What the Redis client would refuse only when it connects, after start: said at start instead.
  if (url.hostname === '') return { error: 'must name a host (redis://host:port)' };
  if (url.pathname !== '' && url.pathname !== '/' && !/^\/\d{1,5}$/.test(url.pathname)) {
    return { error: 'the path must be a database number (redis://host:port/0), or nothing' };
  }
  try {
    decodeURIComponent(url.username);
    decodeURIComponent(url.password);
  } catch {
    return { error: 'the credentials hold an invalid percent-escape' };
  }
  return { value: url };
};

/**
 * A list of Redis nodes, comma-, space- or newline-separated: each `host:port` or a `redis://` /
 * `rediss://` URL (credentials in the first one apply to all). All use TLS or none do.
 */
export const parseRedisNodes: SecretParser<readonly URL[]> = (text) => {
  const entries = text.split(/[\s,]+/).filter(Boolean);
  if (entries.length === 0) return { error: 'must list at least one host:port or redis:// URL' };
  const urls: URL[] = [];
  for (const entry of entries) {
    const parsed = parseRedisUrl(entry.includes('://') ? entry : `redis://${entry}`);
    if ('error' in parsed) return { error: `entry ${urls.length + 1}: ${parsed.error}` };
    if (parsed.value.port === '') return { error: `entry ${urls.length + 1}: must give a port (host:port)` };
    urls.push(parsed.value);
  }
  if (new Set(urls.map((u) => u.protocol)).size > 1) return { error: 'mixes redis:// and rediss://: use TLS for every node or for none' };
  return { value: Object.freeze(urls) };
};

const parseCa: SecretParser<string> = (text) =>
  text.includes('-----BEGIN CERTIFICATE-----') ? { value: text } : { error: 'holds no PEM certificate (-----BEGIN CERTIFICATE-----)' };

/**
 * Where Redis is (contract, Redis topologies): one server (`--redis-url`), a cluster
 * (`--redis-cluster-nodes`, seed nodes) or a Sentinel-managed master (`--redis-sentinels` with
 * `--redis-sentinel-master`). URLs carry the credentials; file-backed secrets follow rotation.
 */
export type RedisTarget =
  | { readonly kind: 'single'; readonly url: Secret<URL> }
  | { readonly kind: 'cluster'; readonly nodes: Secret<readonly URL[]> }
  | { readonly kind: 'sentinel'; readonly sentinels: Secret<readonly URL[]>; readonly masterName: string };

/** Redis, for state shared by replicas. */
export interface RedisConfig {
  readonly target: RedisTarget;
  /** `--redis-tls-ca-file`: the PEM of a private CA that signed Redis' certificate; null: the system's CAs. */
  readonly tlsCa: Secret<string> | null;
  /** `--redis-key-prefix`: every key and channel starts with it, inside one hash tag. */
  readonly keyPrefix: string;
  /** `--redis-command-timeout-ms`: deadline of every call. */
  readonly commandTimeoutMs: number;
  /**
   * `--redis-wait-replicas`: queue mode, passthrough claims and accepts, and shared revocations
   * count only what this many Redis replicas hold.
   */
  readonly waitReplicas: number;
  /**
   * `--fleet-invalidation-max-silence-ms`: a replica that could not read the invalidation log this
   * long while Redis answers others serves nothing from its cache until it has caught up.
   */
  readonly invalidationMaxSilenceMs: number;
}

/** Every secret a Redis configuration holds (to watch for rotation, and to close). */
export function redisSecrets(redis: RedisConfig): Secret<unknown>[] {
  const t = redis.target;
  const where: Secret<unknown> = t.kind === 'single' ? t.url : t.kind === 'cluster' ? t.nodes : t.sentinels;
  return redis.tlsCa ? [where, redis.tlsCa] : [where];
}

/** The three ways to say where Redis is (contract, Redis topologies); exactly one is allowed. */
const REDIS_TARGET_FLAGS = ['redis-url', 'redis-cluster-nodes', 'redis-sentinels'] as const;

/** Where Redis is and how it is used; null when no Redis is configured (or it cannot be). */
export function readRedis(r: Reader): RedisConfig | null {
  const given = REDIS_TARGET_FLAGS.filter((name) => r.raw(name) || r.raw(`${name}-file`));
  if (given.length > 1) {
    r.problem(`--${given[1]}`, `give one of ${REDIS_TARGET_FLAGS.map((f) => `--${f}`).join(', ')} (each with its -file form), not ${given.map((f) => `--${f}`).join(' and ')}`);
    return null;
  }
  const masterRaw = r.raw('redis-sentinel-master');
  let target: RedisTarget | null = null;
  if (given[0] === 'redis-url') {
    const url = r.secret('redis-url', parseRedisUrl);
    if (url) target = { kind: 'single', url };
  } else if (given[0] === 'redis-cluster-nodes') {
    const nodes = r.secret('redis-cluster-nodes', parseRedisNodes);
    if (nodes) target = { kind: 'cluster', nodes };
  } else if (given[0] === 'redis-sentinels') {
    const sentinels = r.secret('redis-sentinels', parseRedisNodes);
    if (!masterRaw) r.problem('--redis-sentinel-master', 'is required with --redis-sentinels: the name the sentinels monitor the master under');
    else if (!/^[\x21-\x7e]{1,128}$/.test(masterRaw.value)) r.problem(masterRaw.label, 'must be a name without spaces, at most 128 characters');
    if (sentinels && masterRaw) target = { kind: 'sentinel', sentinels, masterName: masterRaw.value };
  }
  if (masterRaw && given[0] !== 'redis-sentinels') r.problem(masterRaw.label, 'is for --redis-sentinels only');
  const caRaw = r.raw('redis-tls-ca-file');
  let tlsCa = null;
  if (caRaw) {
    const ca = fileSecret(caRaw.value, '--redis-tls-ca-file', parseCa);
    if (typeof ca === 'string') r.problem(caRaw.label, ca);
    else tlsCa = ca;
  }
  const prefix = r.raw('redis-key-prefix');
  const keyPrefix = prefix?.value ?? DEFAULT_REDIS_KEY_PREFIX;
  if (prefix && !/^[\x21-\x7a\x7c\x7e]{0,128}$/.test(keyPrefix)) {
    r.problem(prefix.label, 'must be at most 128 printable characters, without spaces, { or } (the sidecar wraps it in a hash tag itself)');
  }
  const commandTimeoutMs = r.int('redis-command-timeout-ms', DEFAULT_REDIS_COMMAND_TIMEOUT_MS, 1, 60_000);
  const waitReplicas = r.int('redis-wait-replicas', 0, 0, 16);
  const invalidationMaxSilenceMs = r.int('fleet-invalidation-max-silence-ms', DEFAULT_FLEET_INVALIDATION_MAX_SILENCE_MS, 1, 3_600_000);
  if (!target) return null;
  if (tlsCa && !redisUsesTls(target)) r.problem(caRaw!.label, 'is given, but Redis is not reached over TLS (use rediss:// URLs)');
  return { target, tlsCa, keyPrefix, commandTimeoutMs, waitReplicas, invalidationMaxSilenceMs };
}

const redisUsesTls = (target: RedisTarget): boolean => {
  const first = target.kind === 'single' ? target.url.current() : (target.kind === 'cluster' ? target.nodes : target.sentinels).current()[0];
  return first?.protocol === 'rediss:';
};

const REDIS_REQUIRED = 'is required (or --redis-url-file, --redis-cluster-nodes[-file], --redis-sentinels[-file] with --redis-sentinel-master)';

/**
 * Resolves where Redis is (`--redis-url`, `--redis-cluster-nodes` or `--redis-sentinels`, each with
 * its -file form), `--redis-key-prefix` and `--redis-command-timeout-ms` for the one-shot commands
 * that read the queue (`webhook dead-letters`); one of the three is required.
 * @throws ConfigError listing every problem.
 */
export function resolveRedisConfig(flags: RawFlags, env: RawEnv = process.env): RedisConfig {
  const r = new Reader(flags, env);
  const redis = readRedis(r);
  if (!redis && r.problems.length === 0) r.problem('--redis-url', REDIS_REQUIRED);
  if (r.problems.length > 0 || !redis) throw new ConfigError(r.problems);
  return Object.freeze(redis);
}

