import { ConfigError } from './errors.js';
import { DEFAULT_ADMIN_LISTEN, DEFAULT_DECISION_LISTEN, DEFAULT_SECRET_POLL_INTERVAL_MS, DEFAULT_SHUTDOWN_TIMEOUT_MS, DEFAULT_WEBHOOK_LISTEN, LOG_LEVELS, type LogLevel } from './options.js';
import { readCache, readDecisionApi, readDecisionLog, readForwardAuth, readUpstream, readUpstreamPool } from './read-decision.js';
import { readRedecReconcile } from './read-redec.js';
import { readRedis } from './read-redis.js';
import { readWebhooks } from './read-webhooks.js';
import { Reader } from './reader.js';
import type { RawEnv, RawFlags, SidecarConfig } from './types.js';

export { parseWebhookSecrets, parseRequiredHeader, resolveWebhookSecrets } from './read-webhooks.js';
export { parseRedisNodes, parseRedisUrl, resolveRedisConfig } from './read-redis.js';
export { resolveUpstreamConfig } from './read-decision.js';
export { resolveRedecListingBounds, resolveRedecListingFields } from './read-redec.js';

/** The three listeners' addresses; the webhook one matters only when the ingress is on. */
function readListeners(r: Reader): SidecarConfig['listeners'] {
  const decision = r.listen('listen', DEFAULT_DECISION_LISTEN, true);
  const webhook = r.listen('webhook-listen', DEFAULT_WEBHOOK_LISTEN);
  const admin = r.listen('admin-listen', DEFAULT_ADMIN_LISTEN);
  return Object.freeze({ decision, webhook, admin });
}

/** Two listeners on one port (a wildcard host overlaps every host): the second one named. */
function checkPorts(r: Reader, listeners: SidecarConfig['listeners'], webhooksOn: boolean): void {
  const ports = [
    ['--listen', listeners.decision],
    ['--admin-listen', listeners.admin],
    ...(webhooksOn ? ([['--webhook-listen', listeners.webhook]] as const) : []),
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
}

/** What the whole process shares: the log level, the shutdown budget, how often secrets are re-read. */
function readProcessWide(r: Reader): Pick<SidecarConfig, 'logLevel' | 'shutdownTimeoutMs' | 'secretPollIntervalMs'> {
  const logLevel = r.oneOf<LogLevel>('log-level', LOG_LEVELS, 'info');
  const shutdownTimeoutMs = r.int('shutdown-timeout-ms', DEFAULT_SHUTDOWN_TIMEOUT_MS, 0, 600_000);
  const secretPollIntervalMs = r.int('secret-poll-interval-ms', DEFAULT_SECRET_POLL_INTERVAL_MS, 100, 3_600_000);
  return { logLevel, shutdownTimeoutMs, secretPollIntervalMs };
}

/**
 * Resolves and validates every `serve` flag (flag wins over `CONSENT_SIDECAR_*`): each capability
 * reads its own flags (read-*.ts, their defaults beside them in options.ts), this collector joins
 * their problems and checks what spans two of them.
 * @throws ConfigError listing every problem, each naming its flag.
 * @example
 * const config = loadServeConfig({ 'upstream-url': 'http://127.0.0.1:7800', 'api-key': 'k' }, {});
 */
export function loadServeConfig(flags: RawFlags, env: RawEnv = process.env): SidecarConfig {
  const r = new Reader(flags, env);
  const upstream = readUpstream(r);
  const pool = readUpstreamPool(r);
  const listeners = readListeners(r);
  const cache = readCache(r);
  const decisionApi = readDecisionApi(r);
  const forwardAuth = readForwardAuth(r);
  const webhooks = readWebhooks(r);
  const redis = readRedis(r);
  const processWide = readProcessWide(r);
  const decisionLog = readDecisionLog(r);
  const redecReconcile = readRedecReconcile(r);
  // The durable queue lives in Redis: without it there is nowhere to put an event (issue 10).
  if (webhooks?.delivery === 'queue' && !redis && !r.problems.some((p) => p.startsWith('--redis'))) {
    r.problem('--redis-url', 'is required with --webhook-delivery queue (or --redis-url-file, --redis-cluster-nodes[-file], --redis-sentinels[-file]): the queue lives in Redis');
  }
  checkPorts(r, listeners, webhooks !== null);

  if (r.problems.length > 0 || !upstream) throw new ConfigError(r.problems);
  return Object.freeze({
    upstream: Object.freeze({ ...upstream, ...pool }),
    listeners,
    cache,
    decisionApi,
    forwardAuth,
    webhooks: webhooks ? Object.freeze(webhooks) : null,
    redis: redis ? Object.freeze(redis) : null,
    ...processWide,
    decisionLog,
    redecReconcile,
  });
}
