import type { DiagLogger } from '@opentelemetry/api';
import type { Logger } from './logger.js';
import { RateLimiter } from './rate-limited-log.js';

/** One log line per minute at most: a collector that is down fails every batch. */
const EXPORT_PROBLEM_LOG_INTERVAL_MS = 60_000;
/** How much of OpenTelemetry's own message a log line keeps. */
const MAX_DETAIL_CHARS = 200;

/**
 * OpenTelemetry's own diagnostics (a failed export, spans dropped on a full queue) as our log:
 * `tracing_export_problem` at warn, one line a minute with the count held back since. Without it
 * the SDK says nothing, and a dead collector is invisible. The SDK's messages name an address or a
 * count, never a span's content; they are cut at 200 characters all the same.
 */
export function diagnosticsTo(logger: Logger, now: () => number = Date.now): DiagLogger {
  const limiter = new RateLimiter(EXPORT_PROBLEM_LOG_INTERVAL_MS, now);
  const say = (level: 'error' | 'warn') => (message: string, ...args: unknown[]): void => {
    const suppressed = limiter.admit('tracing_export_problem');
    if (suppressed === undefined) return;
    const first = args.find((a) => typeof a === 'string' || a instanceof Error);
    const detail = `${message}${first === undefined ? '' : ` ${first instanceof Error ? first.message : String(first)}`}`.slice(0, MAX_DETAIL_CHARS);
    logger.warn({ event: 'tracing_export_problem', level_from_sdk: level, detail, suppressed }, 'OpenTelemetry: spans are not reaching the collector (decisions are not affected)');
  };
  const quiet = (): void => undefined;
  return { error: say('error'), warn: say('warn'), info: quiet, debug: quiet, verbose: quiet };
}
