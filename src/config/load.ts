import { readAppSigning } from './app-signing.js';
import { readCache } from './cache.js';
import { readDecisionApi, readForwardAuth } from './decision-api.js';
import { ConfigError } from './errors.js';
import { readGrpc } from './grpc.js';
import { checkPorts, readListeners } from './listen.js';
import { readListenerBounds } from './listener-bounds.js';
import { readDecisionLog, readLogLevel } from './observability.js';
import { readProcessWide } from './process-wide.js';
import { readRedecReconcile } from './redec.js';
import { readRedis } from './redis.js';
import { readTracing } from './tracing.js';
import { Reader, type RawEnv, type RawFlags } from './reader.js';
import type { SidecarConfig } from './sidecar-config.js';
import { readUpstream, readUpstreamPool } from './upstream.js';
import { readWebhooks } from './webhooks.js';

export { parseAppSigningSecrets } from './app-signing.js';
export { parseWebhookSecrets, parseRequiredHeader, resolveWebhookMaxBodyBytes, resolveWebhookSecrets } from './webhooks.js';
export { parseRedisNodes, parseRedisUrl, resolveRedisConfig } from './redis.js';
export { resolveUpstreamConfig } from './upstream.js';
export { resolveRedecListingBounds, resolveRedecListingFields } from './redec.js';
export { OTEL_VARIABLES } from './tracing.js';

/** The queue lives in Redis: without it there is nowhere to put an event. */
function checkQueueHasRedis(r: Reader, webhooks: SidecarConfig['webhooks'], redis: SidecarConfig['redis']): void {
  if (webhooks?.delivery === 'queue' && !redis && !r.problems.some((p) => p.startsWith('--redis'))) {
    r.problem('--redis-url', 'is required with --webhook-delivery queue (or --redis-url-file, --redis-cluster-nodes[-file], --redis-sentinels[-file]): the queue lives in Redis');
  }
}

/**
 * Resolves and validates every `serve` flag (flag wins over `CONSENT_SIDECAR_*`): each capability
 * reads its own flags (upstream.ts, cache.ts, webhooks.ts, … each with its options and defaults
 * beside its reader), this collector joins their problems and checks what spans two of them.
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
  const grpc = readGrpc(r);
  const webhooks = readWebhooks(r);
  const appSigning = readAppSigning(r, webhooks?.secrets.current() ?? null);
  const redis = readRedis(r);
  const logLevel = readLogLevel(r);
  const processWide = readProcessWide(r);
  const decisionLog = readDecisionLog(r);
  const redecReconcile = readRedecReconcile(r, webhooks !== null);
  const tracing = readTracing(r, env);
  const listenerBounds = readListenerBounds(r, webhooks?.bodyTimeoutMs ?? 10_000);
  checkQueueHasRedis(r, webhooks, redis);
  checkPorts(r, listeners, webhooks !== null, grpc?.listen);

  if (r.problems.length > 0 || !upstream) throw new ConfigError(r.problems);
  return Object.freeze({
    upstream: Object.freeze({ ...upstream, ...pool }),
    listeners,
    listenerBounds,
    cache,
    decisionApi,
    forwardAuth,
    grpc,
    webhooks: webhooks ? Object.freeze(webhooks) : null,
    appSigning,
    redis: redis ? Object.freeze(redis) : null,
    logLevel,
    ...processWide,
    decisionLog,
    redecReconcile,
    tracing,
  });
}
