import type { Logger } from 'pino';
import { RateLimiter } from '../observability/rate-limited-log.js';

/**
 * Warns about pre-evaluation denials: they point at the tenant's configuration or references
 * (a Flow not published, an ambiguous Flow, an unknown customer), not at the data subject, so an
 * operator must see them. At most one line per (reason, configKey) per interval, with the count of
 * lines held back; never the userReference.
 */
export class PreEvaluationLog {
  private readonly limiter: RateLimiter;

  constructor(
    private readonly logger: Logger,
    intervalMs: number,
    now: () => number = Date.now,
  ) {
    this.limiter = new RateLimiter(intervalMs, now);
  }

  record(reason: string, configKey: string): void {
    const suppressedSinceLast = this.limiter.admit(`${reason}\u0000${configKey}`);
    if (suppressedSinceLast === undefined) return;
    this.logger.warn(
      { event: 'pre_evaluation_denial', reason, configKey, suppressedSinceLast },
      'the service denied before evaluating: check the tenant configuration or references',
    );
  }
}
