import type { OptionSpec } from './option-spec.js';
import type { Reader } from './reader.js';

// What the whole process shares: the shutdown budget and how often secret files are re-read.

/** Time given to in-flight work after SIGTERM (ms). */
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 20_000;
/** How often secret files are re-read (ms). */
export const DEFAULT_SECRET_POLL_INTERVAL_MS = 5000;

export const PROCESS_OPTIONS: readonly OptionSpec[] = [
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

/** What the whole process shares (`--shutdown-timeout-ms`, `--secret-poll-interval-ms`). */
export interface ProcessWideConfig {
  /** Time given to in-flight work after SIGTERM (ms). */
  readonly shutdownTimeoutMs: number;
  /** How often secret files are re-read (ms). */
  readonly secretPollIntervalMs: number;
}

/** `--shutdown-timeout-ms`, `--secret-poll-interval-ms`. */
export function readProcessWide(r: Reader): ProcessWideConfig {
  const shutdownTimeoutMs = r.int('shutdown-timeout-ms', DEFAULT_SHUTDOWN_TIMEOUT_MS, 0, 600_000);
  const secretPollIntervalMs = r.int('secret-poll-interval-ms', DEFAULT_SECRET_POLL_INTERVAL_MS, 100, 3_600_000);
  return { shutdownTimeoutMs, secretPollIntervalMs };
}
