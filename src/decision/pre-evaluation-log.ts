import type { Logger } from '../observability/logger.js';
import { RateLimiter } from '../observability/rate-limited-log.js';

/**
 * Most `pre_evaluation_denial` lines per interval, all (reason, configKey) pairs together. The
 * configKey is the application's input: without this bound, N distinct keys were N lines.
 */
export const MAX_PRE_EVALUATION_LINES_PER_INTERVAL = 10;

/**
 * Warns about pre-evaluation denials: they point at the tenant's configuration or references
 * (a Flow not published, an ambiguous Flow, an unknown customer), not at the data subject, so an
 * operator must see them. At most one line per (reason, configKey) per interval, with the count of
 * its own denials held back since (`suppressedSinceLast`), and at most
 * {@link MAX_PRE_EVALUATION_LINES_PER_INTERVAL} lines per interval in all: past that, denials are
 * held back and counted, and the next line says how many (`suppressedOverLimit`). Never the
 * userReference. Every denial is counted in the metrics either way.
 */
export class PreEvaluationLog {
  private readonly limiter: RateLimiter;
  private windowStart = Number.NEGATIVE_INFINITY;
  private linesInWindow = 0;
  private overLimit = 0;

  constructor(
    private readonly logger: Logger,
    private readonly intervalMs: number,
    private readonly now: () => number = Date.now,
  ) {
    this.limiter = new RateLimiter(intervalMs, now);
  }

  record(reason: string, configKey: string): void {
    const now = this.now();
    if (now - this.windowStart >= this.intervalMs) {
      this.windowStart = now;
      this.linesInWindow = 0;
    }
    // Held back before the per-key limiter sees it: the key's own line stays due.
    if (this.linesInWindow >= MAX_PRE_EVALUATION_LINES_PER_INTERVAL) {
      this.overLimit++;
      return;
    }
    const suppressedSinceLast = this.limiter.admit(`${reason}\u0000${configKey}`);
    if (suppressedSinceLast === undefined) return;
    this.linesInWindow++;
    const held = this.overLimit;
    this.overLimit = 0;
    this.logger.warn(
      { event: 'pre_evaluation_denial', reason, configKey, suppressedSinceLast, ...(held > 0 ? { suppressedOverLimit: held } : {}) },
      'the service denied before evaluating: check the tenant configuration or references',
    );
  }
}
