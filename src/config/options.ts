import { LOG_LEVELS, type LogLevel } from '../observability/log-levels.js';
import { DECISION_LOG_OPTIONS, DECISION_OPTIONS, UPSTREAM_OPTIONS } from './options-decision.js';
import { REDEC_RECONCILE_OPTIONS } from './options-redec.js';
import { REDIS_OPTIONS } from './options-redis.js';
import { WEBHOOK_OPTIONS, WEBHOOK_SHARED_OPTIONS } from './options-webhooks.js';
import type { OptionSpec } from './option-spec.js';

export * from './option-spec.js';
export * from './options-decision.js';
export * from './options-redec.js';
export * from './options-redis.js';
export * from './options-webhooks.js';

// The levels belong to the logger (observability); the flag's reader takes them from there.
export { LOG_LEVELS, type LogLevel };

export const DEFAULT_DECISION_LISTEN = '127.0.0.1:7700';
export const DEFAULT_WEBHOOK_LISTEN = '0.0.0.0:7701';
export const DEFAULT_ADMIN_LISTEN = '0.0.0.0:7702';
/** Time given to in-flight work after SIGTERM (ms). */
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 20_000;
/** How often secret files are re-read (ms). */
export const DEFAULT_SECRET_POLL_INTERVAL_MS = 5000;

/** The three listeners (after the upstream flags in help). */
const LISTENER_OPTIONS: readonly OptionSpec[] = [
  { name: 'listen', arg: '<host:port>', description: 'decision API listener', defaultText: DEFAULT_DECISION_LISTEN },
  { name: 'webhook-listen', arg: '<host:port>', description: 'webhook ingress listener', defaultText: DEFAULT_WEBHOOK_LISTEN },
  { name: 'admin-listen', arg: '<host:port>', description: 'metrics and probes listener', defaultText: DEFAULT_ADMIN_LISTEN },
];

/** What the whole process shares. */
const PROCESS_OPTIONS: readonly OptionSpec[] = [
  { name: 'log-level', arg: '<level>', description: `one of ${LOG_LEVELS.join(', ')}`, defaultText: 'info' },
  {
    name: 'shutdown-timeout-ms',
    arg: '<ms>',
    description: 'time given to in-flight work after SIGTERM',
    defaultText: String(DEFAULT_SHUTDOWN_TIMEOUT_MS),
  },
  {
    name: 'secret-poll-interval-ms',
    arg: '<ms>',
    description: 'how often secret files are re-read',
    defaultText: String(DEFAULT_SECRET_POLL_INTERVAL_MS),
  },
];

/**
 * Every `serve` flag, each capability's table in the order help shows them. Every flag
 * `--some-flag` also reads `CONSENT_SIDECAR_SOME_FLAG`; a flag wins over its variable. The CLI
 * builds its options from these tables, so help text, variables and validation cannot drift apart.
 */
export const SERVE_OPTIONS: readonly OptionSpec[] = [
  ...UPSTREAM_OPTIONS,
  ...LISTENER_OPTIONS,
  ...DECISION_OPTIONS,
  ...WEBHOOK_OPTIONS,
  ...REDIS_OPTIONS,
  ...WEBHOOK_SHARED_OPTIONS,
  ...PROCESS_OPTIONS,
  ...DECISION_LOG_OPTIONS,
  ...REDEC_RECONCILE_OPTIONS,
];
