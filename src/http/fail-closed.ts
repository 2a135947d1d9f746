import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { causeOf, failClosedAnswer, type Answer, type DecisionMetrics, type DecisionRoute } from '../decision/index.js';
import type { RateLimiter } from '../observability/index.js';

/**
 * The fail-closed boundary the decision routes share: an error becomes its cause's 503 DENY
 * answer, counted, and logged at most once per cause per interval (`failLog`, shared by the routes).
 * `route` is added to the log line for every route but the check.
 */
export function failClosedAnswerFor(o: { metrics: DecisionMetrics; logger: Logger; failLog: RateLimiter; route: DecisionRoute }): (err: unknown) => Answer {
  const routeField = o.route === 'check' ? {} : { route: o.route };
  return (err) => {
    const cause = causeOf(err);
    o.metrics.failedClosed(cause);
    const suppressed = o.failLog.admit(cause);
    if (suppressed !== undefined) {
      const level = cause === 'internal_error' ? 'error' : 'warn';
      o.logger[level]({ event: 'fail_closed', ...routeField, cause, suppressedSinceLast: suppressed, err: cause === 'internal_error' ? err : undefined }, (err as Error)?.message ?? 'fail closed');
    }
    return failClosedAnswer(cause);
  };
}

/**
 * The answer when answering itself failed: a fixed 503 with nothing that could throw again (no
 * metrics, no rendering), the connection cut if even that cannot be written.
 */
export function lastResort(res: ServerResponse, err: unknown, o: { logger: Logger; route: DecisionRoute; headers: OutgoingHttpHeaders | readonly string[]; body: string | Buffer }): void {
  try {
    o.logger.error({ event: 'fail_closed', ...(o.route === 'check' ? {} : { route: o.route }), cause: 'internal_error', err }, 'answering failed; last-resort 503');
  } catch {
    // nothing left to tell
  }
  try {
    if (res.headersSent) res.destroy();
    else {
      res.writeHead(503, o.headers as OutgoingHttpHeaders);
      res.end(o.body);
    }
  } catch {
    res.destroy();
  }
}
