import { parseListenAddress, type ListenAddress } from '../lib/listen-address.js';
import { ConfigError } from './errors.js';
import {
  DEFAULT_ADMIN_LISTEN,
  DEFAULT_BREAKER_COOLDOWN_MS,
  DEFAULT_BREAKER_FAILURE_THRESHOLD,
  DEFAULT_CACHE_MAX_ENTRIES,
  DEFAULT_CACHE_MAX_TTL_MS,
  DEFAULT_CACHE_REFRESH_AHEAD_MS,
  DEFAULT_CACHE_SAFETY_MARGIN_MS,
  DEFAULT_DECISION_LISTEN,
  DEFAULT_FORWARD_AUTH_USER_HEADER,
  DEFAULT_MAX_REQUEST_BYTES,
  DEFAULT_PASSTHROUGH_TIMEOUT_MS,
  DEFAULT_PRE_EVALUATION_LOG_INTERVAL_MS,
  DEFAULT_REDIS_COMMAND_TIMEOUT_MS,
  DEFAULT_REDIS_KEY_PREFIX,
  DEFAULT_WEBHOOK_QUEUE_HORIZON_MS,
  DEFAULT_WEBHOOK_QUEUE_MAX_EVENTS,
  DEFAULT_WEBHOOK_DEDUP_LEASE_MARGIN_MS,
  DEFAULT_SECRET_POLL_INTERVAL_MS,
  DEFAULT_SHUTDOWN_TIMEOUT_MS,
  DEFAULT_UPSTREAM_CONNECTIONS,
  DEFAULT_UPSTREAM_MAX_IN_FLIGHT,
  DEFAULT_UPSTREAM_TIMEOUT_MS,
  DEFAULT_WEBHOOK_DEDUP_MAX_ENTRIES,
  DEFAULT_WEBHOOK_DEDUP_RETENTION_MS,
  DEFAULT_WEBHOOK_FORWARD_TIMEOUT_MS,
  DEFAULT_WEBHOOK_LISTEN,
  DEFAULT_WEBHOOK_MAX_BODY_BYTES,
  DEFAULT_WEBHOOK_PATH,
  DEFAULT_WEBHOOK_TOLERANCE_S,
  DEFAULT_WEBHOOK_BODY_TIMEOUT_MS,
  DEFAULT_WEBHOOK_MAX_UNVERIFIED_BYTES,
  LOG_LEVELS,
  WEBHOOK_DELIVERY_MODES,
  envName,
  type LogLevel,
  type WebhookDeliveryMode,
} from './options.js';
import { fileSecret, staticSecret, type Secret, type SecretParser } from './secret.js';
import type { RawEnv, RawFlags, RedisConfig, RedisTarget, RequiredHeader, SidecarConfig, UpstreamConfig, WebhookConfig } from './types.js';
import { DEFAULT_DECISION_LOG_BUFFER_BYTES, DEFAULT_DECISION_LOG_SAMPLE_RATE } from './options.js';
import type { DecisionLogConfig, RedecListingFields, RedecReconcileConfig } from './types.js';
import {
  DEFAULT_REDEC_RECONCILE_GRACE_MS,
  DEFAULT_REDEC_RECONCILE_INTERVAL_MS,
  DEFAULT_REDEC_RECONCILE_PAGE_LIMIT,
  DEFAULT_REDEC_RECONCILE_REPEAT_MS,
} from './options.js';

/** Headers the service will not let the portal replace, so they can never be the custom header. */
const FORBIDDEN_REQUIRED_HEADER = /^(x-service-.*|host|content-type|content-length|transfer-encoding|connection)$/i;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/**
 * Reads raw flags and variables, collecting every problem before failing, so one run of
 * `serve` tells the operator all that is wrong. Each problem names the flag (and the variable
 * when the value came from it).
 */
class Reader {
  readonly problems: string[] = [];

  constructor(
    private readonly flags: RawFlags,
    private readonly env: RawEnv,
  ) {}

  /** `--name` or `--name (from CONSENT_SIDECAR_NAME)`. */
  private label(name: string, fromEnv: boolean): string {
    return fromEnv ? `--${name} (from ${envName(name)})` : `--${name}`;
  }

  raw(name: string): { value: string; label: string } | undefined {
    const flag = this.flags[name];
    if (typeof flag === 'string') return { value: flag, label: this.label(name, false) };
    if (Array.isArray(flag) && flag.length > 0) return { value: flag.join('\n'), label: this.label(name, false) };
    const env = this.env[envName(name)];
    if (env !== undefined && env !== '') return { value: env, label: this.label(name, true) };
    return undefined;
  }

  list(name: string): { values: string[]; label: string } | undefined {
    const flag = this.flags[name];
    if (Array.isArray(flag) && flag.length > 0) return { values: [...flag], label: this.label(name, false) };
    if (typeof flag === 'string') return { values: [flag], label: this.label(name, false) };
    const env = this.env[envName(name)];
    if (env !== undefined && env.trim() !== '') {
      return { values: env.split(/[\n,]/).map((s) => s.trim()).filter(Boolean), label: this.label(name, true) };
    }
    return undefined;
  }

  problem(label: string, message: string): void {
    this.problems.push(`${label}: ${message}`);
  }

  int(name: string, fallback: number, min: number, max: number): number {
    const raw = this.raw(name);
    if (!raw) return fallback;
    const text = raw.value.trim();
    const n = /^-?\d+$/.test(text) ? Number(text) : Number.NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max) {
      this.problem(raw.label, `must be an integer from ${min} to ${max}, got "${raw.value}"`);
      return fallback;
    }
    return n;
  }

  url(name: string, required: boolean): URL | null {
    const raw = this.raw(name);
    if (!raw) {
      if (required) this.problem(`--${name}`, `is required (or set ${envName(name)})`);
      return null;
    }
    try {
      const url = new URL(raw.value);
      if (url.protocol !== 'http:' && url.protocol !== 'https:') {
        this.problem(raw.label, `must be an http:// or https:// URL, got "${raw.value}"`);
        return null;
      }
      if (url.username || url.password) {
        this.problem(raw.label, 'must not carry credentials; use the key or secret flags');
        return null;
      }
      return url;
    } catch {
      this.problem(raw.label, `is not a valid URL: "${raw.value}"`);
      return null;
    }
  }

  listen(name: string, fallback: string, unix = false): ListenAddress {
    const raw = this.raw(name);
    const parsed = parseListenAddress(raw?.value ?? fallback, { unix });
    if (typeof parsed === 'string') {
      this.problem(raw?.label ?? `--${name}`, parsed);
      return { host: '127.0.0.1', port: 0 };
    }
    return parsed;
  }

  oneOf<T extends string>(name: string, allowed: readonly T[], fallback: T): T {
    const raw = this.raw(name);
    if (!raw) return fallback;
    if ((allowed as readonly string[]).includes(raw.value)) return raw.value as T;
    this.problem(raw.label, `must be one of ${allowed.join(', ')}, got "${raw.value}"`);
    return fallback;
  }

  /**
   * A secret given as `--name` or `--name-file`, exactly one. Returns null when neither is set
   * (the caller decides whether that is a problem).
   */
  secret<T>(name: string, parse: SecretParser<T>, asList = false): Secret<T> | null {
    const fileName = `${name}-file`;
    const valueRaw = asList ? this.list(name) : this.raw(name);
    const fileRaw = this.raw(fileName);
    if (valueRaw && fileRaw) {
      this.problem(`--${name}`, `give the secret as --${name} or --${fileName}, not both`);
      return null;
    }
    if (fileRaw) {
      const secret = fileSecret(fileRaw.value, `--${fileName}`, parse);
      if (typeof secret === 'string') {
        this.problem(fileRaw.label, secret);
        return null;
      }
      return secret;
    }
    if (valueRaw) {
      const text = 'values' in valueRaw ? valueRaw.values.join('\n') : valueRaw.value;
      const parsed = parse(text);
      if ('error' in parsed) {
        this.problem(valueRaw.label, parsed.error);
        return null;
      }
      return staticSecret(parsed.value, `--${name}`);
    }
    return null;
  }
}

const parseApiKey: SecretParser<string> = (text) => {
  const key = text.trim();
  if (key === '') return { error: 'the API key is empty' };
  if (/[\s]/.test(key)) return { error: 'the API key must not contain whitespace' };
  return { value: key };
};

/** One `whsec_` secret per line; blank lines and `#` comments are ignored. */
export const parseWebhookSecrets: SecretParser<readonly string[]> = (text) => {
  const secrets = text
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
  if (secrets.length === 0) return { error: 'no webhook secret given' };
  const bad = secrets.findIndex((s) => !s.startsWith('whsec_') || s.length <= 'whsec_'.length);
  if (bad >= 0) return { error: `secret #${bad + 1} does not start with "whsec_"` };
  return { value: Object.freeze(secrets) };
};

/** `Name: value`, as configured in the service's portal. */
export const parseRequiredHeader: SecretParser<RequiredHeader> = (text) => {
  const line = text.trim();
  const colon = line.indexOf(':');
  if (colon <= 0) return { error: 'expected "Name: value"' };
  const name = line.slice(0, colon).trim();
  const value = line.slice(colon + 1).trim();
  if (!HEADER_NAME.test(name)) return { error: `"${name}" is not a valid header name` };
  if (FORBIDDEN_REQUIRED_HEADER.test(name)) return { error: `"${name}" cannot be a custom header (the service forbids it)` };
  if (value === '') return { error: 'the header value is empty' };
  return { value: Object.freeze({ name: name.toLowerCase(), value }) };
};

function readUpstream(r: Reader): UpstreamConfig | null {
  const baseUrl = r.url('upstream-url', true);
  const apiKey = r.secret('api-key', parseApiKey);
  if (!apiKey && !r.problems.some((p) => p.startsWith('--api-key'))) {
    r.problem('--api-key', `one of --api-key or --api-key-file is required (or set ${envName('api-key')} / ${envName('api-key-file')})`);
  }
  const timeoutMs = r.int('upstream-timeout-ms', DEFAULT_UPSTREAM_TIMEOUT_MS, 1, 600_000);
  if (!baseUrl || !apiKey) return null;
  return { baseUrl, apiKey, timeoutMs };
}

// --- Forward-auth ---
/** Headers a proxy or node itself owns, or that carry something else: never the user reference. */
const FORBIDDEN_USER_HEADER = /^(host|content-length|content-type|transfer-encoding|connection|keep-alive|upgrade|te|trailer|cookie|cache-control|x-consent-config-key)$/;

function readForwardAuth(r: Reader): SidecarConfig['forwardAuth'] {
  const raw = r.raw('forward-auth-user-header');
  const name = raw ? raw.value.trim().toLowerCase() : DEFAULT_FORWARD_AUTH_USER_HEADER;
  if (raw && !HEADER_NAME.test(name)) r.problem(raw.label, `must be an HTTP header name, got "${raw.value}"`);
  else if (raw && FORBIDDEN_USER_HEADER.test(name)) r.problem(raw.label, `"${name}" cannot carry the user reference`);
  return Object.freeze({ userHeader: name });
}
// --- end Forward-auth ---

function readWebhooks(r: Reader): WebhookConfig | null {
  const appUrl = r.url('app-webhook-url', false);
  const path = r.raw('webhook-path');
  const webhookPath = path?.value ?? DEFAULT_WEBHOOK_PATH;
  if (path && !/^\/[\x21-\x7e]*$/.test(webhookPath)) r.problem(path.label, `must start with "/" and hold no spaces, got "${path.value}"`);
  const secrets = r.secret('webhook-secret', parseWebhookSecrets, true);
  const requiredHeader = r.secret('webhook-required-header', parseRequiredHeader);
  const toleranceS = r.int('webhook-tolerance-s', DEFAULT_WEBHOOK_TOLERANCE_S, 1, 86_400);
  const maxBodyBytes = r.int('webhook-max-body-bytes', DEFAULT_WEBHOOK_MAX_BODY_BYTES, 1024, 64 * 1024 * 1024);
  const forwardTimeoutMs = r.int('webhook-forward-timeout-ms', DEFAULT_WEBHOOK_FORWARD_TIMEOUT_MS, 1, 600_000);
  const delivery = r.oneOf<WebhookDeliveryMode>('webhook-delivery', WEBHOOK_DELIVERY_MODES, 'passthrough');
  const dedupRetentionMs = r.int('webhook-dedup-retention-ms', DEFAULT_WEBHOOK_DEDUP_RETENTION_MS, 60_000, 30 * 86_400_000);
  const dedupMaxEntries = r.int('webhook-dedup-max-entries', DEFAULT_WEBHOOK_DEDUP_MAX_ENTRIES, 1000, 100_000_000);
  // --- unauthenticated load (issue 8) ---
  const maxUnverifiedBytes = r.int('webhook-max-unverified-bytes', DEFAULT_WEBHOOK_MAX_UNVERIFIED_BYTES, 1024, 4 * 1024 * 1024 * 1024);
  const bodyTimeoutMs = r.int('webhook-body-timeout-ms', DEFAULT_WEBHOOK_BODY_TIMEOUT_MS, 1, 600_000);
  if (maxUnverifiedBytes < maxBodyBytes) {
    r.problem('--webhook-max-unverified-bytes', `must be at least --webhook-max-body-bytes (${maxBodyBytes}), or no delivery of the largest size could ever be read`);
  }
  // --- end ---
  const dedupLeaseMs = readDedupLease(r, forwardTimeoutMs);
  const queueHorizonMs = r.int('webhook-queue-horizon-ms', DEFAULT_WEBHOOK_QUEUE_HORIZON_MS, 1, 365 * 86_400_000);
  const queueMaxEvents = r.int('webhook-queue-max-events', DEFAULT_WEBHOOK_QUEUE_MAX_EVENTS, 1, 100_000_000);

  if (!appUrl) {
    if (secrets || requiredHeader) {
      r.problem('--app-webhook-url', 'is required when webhook secrets or a required header are set (the ingress is off without it)');
    }
    return null;
  }
  if (!secrets && !r.problems.some((p) => p.startsWith('--webhook-secret'))) {
    r.problem('--webhook-secret', 'one of --webhook-secret or --webhook-secret-file is required with --app-webhook-url');
  }
  if (!secrets) return null;
  return {
    appUrl,
    path: webhookPath,
    secrets,
    toleranceS,
    maxBodyBytes,
    requiredHeader,
    forwardTimeoutMs,
    delivery,
    dedupRetentionMs,
    dedupMaxEntries,
    maxUnverifiedBytes,
    bodyTimeoutMs,
    dedupLeaseMs,
    queueHorizonMs,
    queueMaxEvents,
  };
}

// --- Several replicas (Redis) ---
/** `redis://` or `rediss://`; the message never repeats the URL (it may hold a password). */
export const parseRedisUrl: SecretParser<URL> = (text) => {
  const trimmed = text.trim();
  let url: URL;
  try {
    url = new URL(trimmed);
  } catch {
    return { error: 'is not a valid URL (expected redis://[user:password@]host:port or rediss://…)' };
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') return { error: `must be a redis:// or rediss:// URL, got "${url.protocol}"` };
  if (url.hostname === '') return { error: 'must name a host (redis://host:port)' };
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

/** The three ways to say where Redis is (contract, Redis topologies); exactly one is allowed. */
const REDIS_TARGET_FLAGS = ['redis-url', 'redis-cluster-nodes', 'redis-sentinels'] as const;

function readRedis(r: Reader): RedisConfig | null {
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
  if (!target) return null;
  if (tlsCa && !redisUsesTls(target)) r.problem(caRaw!.label, 'is given, but Redis is not reached over TLS (use rediss:// URLs)');
  return { target, tlsCa, keyPrefix, commandTimeoutMs, waitReplicas };
}

const redisUsesTls = (target: RedisTarget): boolean => {
  const first = target.kind === 'single' ? target.url.current() : (target.kind === 'cluster' ? target.nodes : target.sentinels).current()[0];
  return first?.protocol === 'rediss:';
};

/** The claim must outlive a forward, or a second replica could forward the same event meanwhile. */
function readDedupLease(r: Reader, forwardTimeoutMs: number): number {
  const raw = r.raw('webhook-dedup-lease-ms');
  const leaseMs = r.int('webhook-dedup-lease-ms', forwardTimeoutMs + DEFAULT_WEBHOOK_DEDUP_LEASE_MARGIN_MS, 1, 3_600_000);
  if (raw && leaseMs <= forwardTimeoutMs && !r.problems.some((p) => p.startsWith(raw.label))) {
    r.problem(raw.label, `must exceed --webhook-forward-timeout-ms (${forwardTimeoutMs}), got ${leaseMs}`);
  }
  return leaseMs;
}
const REDIS_REQUIRED = 'is required (or --redis-url-file, --redis-cluster-nodes[-file], --redis-sentinels[-file] with --redis-sentinel-master)';
// --- end Several replicas ---

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

/**
 * Resolves `--webhook-secret` / `--webhook-secret-file` alone, for `webhook dead-letters replay`,
 * which verifies each dead letter again before it puts it back.
 * @throws ConfigError naming the flag.
 */
export function resolveWebhookSecrets(flags: RawFlags, env: RawEnv = process.env): Secret<readonly string[]> {
  const r = new Reader(flags, env);
  const secrets = r.secret('webhook-secret', parseWebhookSecrets, true);
  if (!secrets && r.problems.length === 0) r.problem('--webhook-secret', "is required (or --webhook-secret-file): serve's secrets, to verify each dead letter again before replaying it");
  if (r.problems.length > 0 || !secrets) throw new ConfigError(r.problems);
  return secrets;
}

/**
 * Resolves the upstream flags shared by `check` and `redec pending`.
 * @throws ConfigError listing every problem.
 */
export function resolveUpstreamConfig(flags: RawFlags, env: RawEnv = process.env): UpstreamConfig {
  const r = new Reader(flags, env);
  const upstream = readUpstream(r);
  if (r.problems.length > 0 || !upstream) throw new ConfigError(r.problems);
  return Object.freeze(upstream);
}

/**
 * Resolves and validates every `serve` flag (flag wins over `CONSENT_SIDECAR_*`).
 * @throws ConfigError listing every problem, each naming its flag.
 * @example
 * const config = loadServeConfig({ 'upstream-url': 'http://127.0.0.1:7800', 'api-key': 'k' }, {});
 */
export function loadServeConfig(flags: RawFlags, env: RawEnv = process.env): SidecarConfig {
  const r = new Reader(flags, env);
  const upstream = readUpstream(r);
  const connections = r.int('upstream-connections', DEFAULT_UPSTREAM_CONNECTIONS, 1, 10_000);
  const maxInFlight = r.int('upstream-max-in-flight', DEFAULT_UPSTREAM_MAX_IN_FLIGHT, 1, 1_000_000);
  const passthroughTimeoutMs = r.int('passthrough-timeout-ms', DEFAULT_PASSTHROUGH_TIMEOUT_MS, 1, 600_000);
  const failureThreshold = r.int('breaker-failure-threshold', DEFAULT_BREAKER_FAILURE_THRESHOLD, 1, 10_000);
  const cooldownMs = r.int('breaker-cooldown-ms', DEFAULT_BREAKER_COOLDOWN_MS, 1, 3_600_000);
  const decision = r.listen('listen', DEFAULT_DECISION_LISTEN, true);
  const webhook = r.listen('webhook-listen', DEFAULT_WEBHOOK_LISTEN);
  const admin = r.listen('admin-listen', DEFAULT_ADMIN_LISTEN);
  const maxEntries = r.int('cache-max-entries', DEFAULT_CACHE_MAX_ENTRIES, 0, 100_000_000);
  const safetyMarginMs = r.int('cache-safety-margin-ms', DEFAULT_CACHE_SAFETY_MARGIN_MS, 0, 3_600_000);
  const maxTtlMs = r.int('cache-max-ttl-ms', DEFAULT_CACHE_MAX_TTL_MS, 1, 7 * 86_400_000);
  const refreshAheadMs = r.int('cache-refresh-ahead-ms', DEFAULT_CACHE_REFRESH_AHEAD_MS, 0, 3_600_000);
  const maxRequestBytes = r.int('max-request-bytes', DEFAULT_MAX_REQUEST_BYTES, 256, 1_048_576);
  const preEvaluationLogIntervalMs = r.int('pre-evaluation-log-interval-ms', DEFAULT_PRE_EVALUATION_LOG_INTERVAL_MS, 0, 86_400_000);
  const forwardAuth = readForwardAuth(r);
  const webhooks = readWebhooks(r);
  const redis = readRedis(r);
  const logLevel = r.oneOf<LogLevel>('log-level', LOG_LEVELS, 'info');
  const shutdownTimeoutMs = r.int('shutdown-timeout-ms', DEFAULT_SHUTDOWN_TIMEOUT_MS, 0, 600_000);
  const secretPollIntervalMs = r.int('secret-poll-interval-ms', DEFAULT_SECRET_POLL_INTERVAL_MS, 100, 3_600_000);
  const decisionLog = readDecisionLog(r);
  const redecReconcile = readRedecReconcile(r);
  // The durable queue lives in Redis: without it there is nowhere to put an event (issue 10).
  if (webhooks?.delivery === 'queue' && !redis && !r.problems.some((p) => p.startsWith('--redis'))) {
    r.problem('--redis-url', 'is required with --webhook-delivery queue (or --redis-url-file, --redis-cluster-nodes[-file], --redis-sentinels[-file]): the queue lives in Redis');
  }

  const ports = [
    ['--listen', decision],
    ['--admin-listen', admin],
    ...(webhooks ? ([['--webhook-listen', webhook]] as const) : []),
  ] as const;
  for (let i = 0; i < ports.length; i++) {
    for (let j = i + 1; j < ports.length; j++) {
      const [a, x] = ports[i]!;
      const [b, y] = ports[j]!;
      if (x.port !== 0 && x.port === y.port && (x.host === y.host || x.host === '0.0.0.0' || y.host === '0.0.0.0')) {
        r.problem(b, `uses the same port as ${a} (${x.port})`);
      }
    }
  }

  if (r.problems.length > 0 || !upstream) throw new ConfigError(r.problems);
  return Object.freeze({
    upstream: Object.freeze({
      ...upstream,
      connections,
      maxInFlight,
      passthroughTimeoutMs,
      breaker: Object.freeze({ failureThreshold, cooldownMs }),
    }),
    listeners: Object.freeze({ decision, webhook, admin }),
    cache: Object.freeze({ maxEntries, safetyMarginMs, maxTtlMs, refreshAheadMs }),
    decisionApi: Object.freeze({ maxRequestBytes, preEvaluationLogIntervalMs }),
    forwardAuth,
    webhooks: webhooks ? Object.freeze(webhooks) : null,
    redis: redis ? Object.freeze(redis) : null,
    logLevel,
    shutdownTimeoutMs,
    secretPollIntervalMs,
    decisionLog,
    redecReconcile,
  });
}

const parseHashKey: SecretParser<string> = (text) => {
  const key = text.trim();
  return key.length >= 16 ? { value: key } : { error: 'the decision log hash key must be at least 16 characters' };
};

/** `--decision-log*`: null when off. */
function readDecisionLog(r: Reader): DecisionLogConfig | null {
  const raw = r.raw('decision-log');
  const destination = raw?.value.trim() ?? 'off';
  const rateRaw = r.raw('decision-log-sample-rate');
  let sampleRate = DEFAULT_DECISION_LOG_SAMPLE_RATE;
  if (rateRaw) {
    const n = /^\s*(0|1|0?\.\d+|1\.0*)\s*$/.test(rateRaw.value) ? Number(rateRaw.value) : Number.NaN;
    if (Number.isNaN(n)) r.problem(rateRaw.label, `must be a number from 0 to 1, got "${rateRaw.value}"`);
    else sampleRate = n;
  }
  const bufferBytes = r.int('decision-log-buffer-bytes', DEFAULT_DECISION_LOG_BUFFER_BYTES, 1024, 1024 * 1024 * 1024);
  const hashKey = r.secret('decision-log-hash-key', parseHashKey);
  if (destination === 'off' || destination === '') {
    hashKey?.close();
    return null;
  }
  return Object.freeze({ destination, sampleRate, hashKey, bufferBytes });
}

// --- REDEC reconciliation (issue 11) ---
const FIELD_NAME = /^[A-Za-z0-9_.~-]{1,64}$/;

function readRedecFields(r: Reader): RedecListingFields {
  const items = r.raw('redec-items-field');
  const cursor = r.raw('redec-cursor-param');
  if (items && !FIELD_NAME.test(items.value)) r.problem(items.label, `must be 1-64 letters, digits, "_", "-", "." or "~", got "${items.value}"`);
  if (cursor && !FIELD_NAME.test(cursor.value)) r.problem(cursor.label, `must be 1-64 letters, digits, "_", "-", "." or "~", got "${cursor.value}"`);
  return Object.freeze({ itemsField: items?.value ?? null, cursorParam: cursor?.value ?? 'cursor' });
}

function readRedecReconcile(r: Reader): RedecReconcileConfig | null {
  const intervalMs = r.int('redec-reconcile-interval-ms', DEFAULT_REDEC_RECONCILE_INTERVAL_MS, 0, 7 * 86_400_000);
  const graceMs = r.int('redec-reconcile-grace-ms', DEFAULT_REDEC_RECONCILE_GRACE_MS, 0, 30 * 86_400_000);
  const repeatMs = r.int('redec-reconcile-repeat-ms', DEFAULT_REDEC_RECONCILE_REPEAT_MS, 1, 30 * 86_400_000);
  const pageLimit = r.int('redec-reconcile-page-limit', DEFAULT_REDEC_RECONCILE_PAGE_LIMIT, 1, 10_000);
  const fields = readRedecFields(r);
  const raw = r.raw('redec-reconcile-interval-ms');
  if (raw && intervalMs > 0 && intervalMs < 100) r.problem(raw.label, `must be 0 (off) or at least 100, got ${intervalMs}`);
  return intervalMs === 0 ? null : Object.freeze({ intervalMs, graceMs, repeatMs, pageLimit, fields });
}

/**
 * Resolves `--redec-items-field` and `--redec-cursor-param` (for `redec pending`).
 * @throws ConfigError naming the flag.
 */
export function resolveRedecListingFields(flags: RawFlags, env: RawEnv = process.env): RedecListingFields {
  const r = new Reader(flags, env);
  const fields = readRedecFields(r);
  if (r.problems.length > 0) throw new ConfigError(r.problems);
  return fields;
}
// --- end REDEC reconciliation ---
