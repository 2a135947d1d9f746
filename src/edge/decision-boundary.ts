import { performance } from 'node:perf_hooks';
import type { Logger } from '../observability/logger.js';
import { causeOf, failClosedAnswer, type Answer, type CheckRequest, type DecisionLog, type DecisionMetrics, type DecisionRoute } from '../decision/index.js';
import type { RequestTrace } from '../lib/trace.js';
import { RateLimiter } from '../observability/index.js';
import { RandomIds } from '../lib/random-id.js';

/** At most one `fail_closed` log line per cause per this interval (ms), across the decision routes. */
const FAIL_LOG_INTERVAL_MS = 1000;

export interface DecisionBoundaryDeps {
  readonly metrics: DecisionMetrics;
  readonly logger: Logger;
  /** The optional decision log (`--decision-log`). */
  readonly decisionLog: Pick<DecisionLog, 'record'> | null;
  /** A fresh id per answer; random (v4) UUIDs by default. */
  readonly newId?: () => string;
}

/** Puts an answer on a route's transport (HTTP, a batch item, a gRPC reply); it may throw. */
export type AnswerWrite<Res> = (res: Res, a: Answer, decisionId: string) => void;

/**
 * The fail-closed boundary of every decision route (check, batch, forward-auth, gRPC): the one
 * place where an error, known or not, becomes a DENY, and where each answer is counted, timed,
 * logged and given its decision id, once. Routes render answers; they never count them.
 */
export class DecisionBoundary {
  readonly newId: () => string;
  private readonly failLog = new RateLimiter(FAIL_LOG_INTERVAL_MS);

  constructor(private readonly deps: DecisionBoundaryDeps) {
    this.newId = deps.newId ?? new RandomIds().id;
  }

  /** A route's own boundary: `write` renders on its transport, `lastResort` writes a fixed 503 that cannot fail. */
  route<Res>(route: DecisionRoute, write: AnswerWrite<Res>, lastResort: (res: Res) => void): RouteBoundary<Res> {
    return new RouteBoundary(this, route, write, lastResort);
  }

  /** An error as its cause's 503 DENY answer: counted by cause and logged at most once per cause a second. */
  failClosed(err: unknown, route: DecisionRoute): Answer {
    const cause = causeOf(err);
    this.deps.metrics.failedClosed(cause);
    const suppressed = this.failLog.admit(cause);
    if (suppressed !== undefined) {
      const level = cause === 'internal_error' ? 'error' : 'warn';
      const routeField = route === 'check' ? {} : { route };
      this.deps.logger[level]({ event: 'fail_closed', ...routeField, cause, suppressedSinceLast: suppressed, err: cause === 'internal_error' ? err : undefined }, (err as Error)?.message ?? 'fail closed');
    }
    return failClosedAnswer(cause);
  }

  /** Counts one answer in the decisions counter (route, decision, source); may throw. */
  count(route: DecisionRoute, a: Answer): void {
    this.deps.metrics.answered(a, route);
  }

  /**
   * What follows an answer once it is out: its duration (from `t0`, performance.now() at arrival),
   * the decision log line and the span, with `decisionId`. Never throws: the caller was answered.
   */
  after(route: DecisionRoute, a: Answer, t0: number, req: CheckRequest | undefined, trace: RequestTrace | null, decisionId: string): void {
    try {
      this.deps.metrics.answeredIn(a, (performance.now() - t0) / 1000);
      if (req !== undefined) this.deps.decisionLog?.record(req, a, route, decisionId);
      trace?.end(a, req?.configKey, decisionId);
    } catch (err) {
      this.lastResortLog(route, err, 'recording an answer failed');
    }
  }

  /**
   * One answer that is not written on its own (a batch item): counted (when counting fails, the
   * error's fail-closed answer instead), logged and given its id. Returns what to render.
   */
  item(route: DecisionRoute, a: Answer, t0: number, req: CheckRequest): { answer: Answer; decisionId: string } {
    const decisionId = this.newId();
    let answer = a;
    try {
      this.count(route, a);
    } catch (err) {
      try {
        answer = this.failClosed(err, route);
        this.count(route, answer);
      } catch (again) {
        answer = LAST_RESORT_ANSWER;
        this.lastResortLog(route, again, 'counting a batch item failed');
      }
    }
    this.after(route, answer, t0, req, null, decisionId);
    return { answer, decisionId };
  }

  /** Logs a failure of the boundary itself; never throws. */
  lastResortLog(route: DecisionRoute, err: unknown, message: string): void {
    try {
      this.deps.logger.error({ event: 'fail_closed', ...(route === 'check' ? {} : { route }), cause: 'internal_error', err }, message);
    } catch {
      // nothing left to tell
    }
  }
}

/** The internal_error answer counted when even writing a fail-closed answer failed (the last resort went out). */
const LAST_RESORT_ANSWER = failClosedAnswer('internal_error');

/**
 * One route's side of the {@link DecisionBoundary}. Every request ends in exactly one of
 * {@link answer} or {@link fail} (or {@link settle}, which is one of them later), and is counted
 * once, with the answer that was actually written.
 */
export class RouteBoundary<Res> {
  constructor(
    private readonly b: DecisionBoundary,
    readonly route: DecisionRoute,
    private readonly write: AnswerWrite<Res>,
    private readonly lastResort: (res: Res) => void,
  ) {}

  /**
   * Counts `a`, then writes it. When counting throws, the error's fail-closed answer is counted and
   * written instead (so the count is of what was written); when writing throws after the count, the
   * fail-closed answer is written uncounted (the request was counted once already); when that
   * fails too, the route's last resort.
   */
  answer(res: Res, a: Answer, t0: number, req: CheckRequest | undefined, trace: RequestTrace | null): void {
    const id = this.b.newId();
    let written = a;
    let counted = false;
    try {
      this.b.count(this.route, a);
      counted = true;
      this.write(res, a, id);
    } catch (err) {
      written = this.rescue(res, err, id, counted);
    }
    this.b.after(this.route, written, t0, req, trace, id);
  }

  /** No decision: the error's 503 DENY, counted by cause, then as {@link answer}. */
  fail(res: Res, err: unknown, t0: number, req: CheckRequest | undefined, trace: RequestTrace | null): void {
    let a: Answer;
    try {
      a = this.b.failClosed(err, this.route);
    } catch (again) {
      a = LAST_RESORT_ANSWER;
      this.b.lastResortLog(this.route, again, 'fail-closed answer failed');
    }
    this.answer(res, a, t0, req, trace);
  }

  /** A decision still being made: answered when it settles, a rejection failing closed. */
  settle(res: Res, decision: Promise<Answer>, t0: number, req: CheckRequest, trace: RequestTrace | null): void {
    decision.then(
      (a) => this.answer(res, a, t0, req, trace),
      (err: unknown) => this.fail(res, err, t0, req, trace),
    );
  }

  private rescue(res: Res, err: unknown, id: string, counted: boolean): Answer {
    try {
      const a = this.b.failClosed(err, this.route);
      if (!counted) this.b.count(this.route, a);
      this.write(res, a, id);
      return a;
    } catch (again) {
      this.b.lastResortLog(this.route, again, 'answering failed; last-resort 503');
      try {
        this.lastResort(res);
      } catch {
        // The route's last resort guards itself; a throw here has nowhere left to go.
      }
      return LAST_RESORT_ANSWER;
    }
  }
}
