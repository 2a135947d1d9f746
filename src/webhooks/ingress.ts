import type { IncomingMessage } from 'node:http';
import type { Logger } from '../observability/logger.js';
import type { WebhookConfig } from '../config/index.js';
import { DeadlineQueue } from '../lib/deadline-queue.js';
import type { RevocationPublisher } from '../lib/revocation-hook.js';
import { UNTRACED_STEPS, type DeliveryTrace, type StepTrace, type WebhookTracer } from '../lib/trace.js';
import { RateLimiter } from '../observability/rate-limited-log.js';
import type { AppRoutes } from './app-routes.js';
import type { DeliveryMode, DeliveryResult } from './delivery-mode.js';
import { parseEnvelope, type WebhookEnvelope } from './envelope.js';
import { reasonLabel, type WebhookAuthErrorCode } from './errors.js';
import { logId } from './event-id.js';
import { secretIndexLabel, type DeliveryOutcome, type WebhookMetrics } from './metrics.js';
import { readUnverifiedBody, SlowBodyWatch } from './read-unverified-body.js';
import { REFUSAL_STATUS, type RouteRejection, type WebhookAnswer } from './answers.js';
import { deliveryHeaders } from './delivery-headers.js';
import { revocationOf } from './revocations.js';
import { deliveryIdOf, type DeliveryFacts } from './stored-delivery.js';
import { UnverifiedBudget } from './unverified-budget.js';
import { checkDeliveryHeaders, startBodyVerification, type DeliveryHeaders, type Verified } from './verify.js';

/** At most one log line per reason (rejections, failures) per interval (ms); the rest are counted. */
export const REJECTION_LOG_INTERVAL_MS = 1000;
/** Time a body has before `--webhook-min-body-rate-bytes` applies to it (ms). */
const MIN_RATE_GRACE_MS = 2000;

export interface WebhookIngressDeps {
  readonly config: WebhookConfig;
  readonly logger: Logger;
  readonly metrics: WebhookMetrics;
  /** Where revocations go: this replica's cache, and with several replicas every other one's. */
  readonly revocations: RevocationPublisher;
  readonly mode: DeliveryMode;
  readonly routes: AppRoutes;
  /** Spans of each delivery (off: null). */
  readonly tracer: WebhookTracer | null;
  /** Epoch ms. */
  readonly now: () => number;
}

/**
 * The delivery pipeline, in the order the contract fixes: the headers, the raw body read under the
 * HMAC and the unverified budget, the signature, the envelope, the revocation, the route by event
 * type, then the delivery mode. Every delivery ends in one {@link WebhookAnswer}; nothing throws
 * out of {@link receive}.
 */
export class WebhookIngress {
  /** Unauthenticated senders choose how often they are refused: the logs must not follow them. */
  private readonly rejectionLog: RateLimiter;
  private readonly revocationLog: RateLimiter;
  /** A dead app or a slow store fails every delivery: one line per cause per interval. */
  private readonly failureLog: RateLimiter;
  private readonly outcomes = new Map<DeliveryOutcome, { inc(): void }>();
  /** Shared by every connection: what an unauthenticated sender can make us hold, in all. */
  private readonly budget: UnverifiedBudget;
  /** The bodies being read, by deadline (they all have `config.bodyTimeoutMs`). */
  private readonly bodyDeadlines = new DeadlineQueue();
  /** The bodies being read, against the minimum data rate. */
  private readonly rates: SlowBodyWatch;

  constructor(private readonly deps: WebhookIngressDeps) {
    // On the ingress's own clock, like every other time decision here.
    this.rejectionLog = new RateLimiter(REJECTION_LOG_INTERVAL_MS, deps.now);
    this.revocationLog = new RateLimiter(1000, deps.now);
    this.failureLog = new RateLimiter(REJECTION_LOG_INTERVAL_MS, deps.now);
    this.budget = new UnverifiedBudget(deps.config.maxUnverifiedBytes, deps.config.maxUnverifiedBytesPerPeer, (n) => deps.metrics.unverifiedBytes.set(n));
    this.rates = new SlowBodyWatch(deps.config.minBodyRateBytes, MIN_RATE_GRACE_MS);
  }

  /** One `POST {path}`: answered whatever happens (an unexpected failure is a 503 the service retries). */
  async receive(req: IncomingMessage): Promise<WebhookAnswer> {
    let trace: DeliveryTrace | null = null;
    let answer: WebhookAnswer;
    try {
      trace = this.deps.tracer === null ? null : this.deps.tracer.webhook(this.deps.config.path);
      answer = await this.pipeline(req, trace);
    } catch (err) {
      this.logFailure({ event: 'webhook_internal_error', cause: 'internal_error', err }, 'webhook handler failed', 'error');
      this.count('failed');
      answer = { status: 503, outcome: 'failed', reason: 'internal_error', then: 'close' };
    }
    trace?.end(answer.status, answer.reason);
    return answer;
  }

  /** Counts a refusal decided before the pipeline (route, method) or by it (size, budget, deadline). */
  refuse(reason: RouteRejection, remoteAddress: string | undefined, then: WebhookAnswer['then']): WebhookAnswer {
    this.count('rejected');
    this.deps.metrics.rejections.inc({ reason });
    this.logRejection({ event: 'webhook_rejected', reason, remoteAddress }, 'webhook delivery rejected');
    return { status: REFUSAL_STATUS[reason], outcome: 'rejected', reason, then } as WebhookAnswer;
  }

  /** Gives up the body reads still waiting (shutdown). */
  close(): void {
    this.bodyDeadlines.clear();
    this.rates.close();
  }

  private async pipeline(req: IncomingMessage, trace: DeliveryTrace | null): Promise<WebhookAnswer> {
    const { config, metrics, now } = this.deps;
    const remote = req.socket.remoteAddress;
    // Read once: the header picked and the header judged are the same one, even across a rotation.
    const required = config.requiredHeader?.current() ?? null;
    const headers = deliveryHeaders(req.rawHeaders, required?.name);
    const checked = checkDeliveryHeaders(headers, { toleranceS: config.toleranceS, nowMs: now(), requiredHeader: required });
    if (checked.skewS !== undefined) metrics.timestampSkew.observe(checked.skewS);
    // Refused on headers alone: the body is never looked at.
    if (!checked.ok) return this.rejectAuth(checked.code, headers, remote, 'discard');

    const steps = trace ?? UNTRACED_STEPS;
    // The HMAC runs over the chunks as they arrive; every byte held until the verdict is taken
    // from the budget shared by all connections.
    const read = await steps.step('verify', () =>
      readUnverifiedBody(req, {
        maxBytes: config.maxBodyBytes,
        budget: this.budget,
        timeoutMs: config.bodyTimeoutMs,
        deadlines: this.bodyDeadlines,
        rates: this.rates,
        verifier: startBodyVerification(checked, config.secrets.current()),
      }),
    );
    if (!read.ok) {
      switch (read.reason) {
        case 'aborted':
          return { status: 400, outcome: 'rejected', reason: 'aborted', then: 'none' };
        case 'too_large':
          return this.refuse('body_too_large', remote, 'discard');
        case 'over_budget':
          // 503: the service retries later, when the unauthenticated load has gone.
          return this.refuse('unverified_budget_exhausted', remote, 'close');
        case 'body_timeout':
          return this.refuse('body_timeout', remote, 'close');
        case 'too_slow':
          return this.refuse('body_too_slow', remote, 'close');
      }
    }
    const verified = read.verified;
    if (!verified.ok) return this.rejectAuth(verified.code, headers, remote, 'keep');
    metrics.secretMatches.inc({ index: secretIndexLabel(verified.secretIndex) });
    // Only now is anything the sender chose trusted: its trace context may be linked.
    trace?.verified(headers.traceparent, headers.tracestate);
    return this.verifiedDelivery(headers, verified, read.body, steps);
  }

  /** A delivery whose signature verified: envelope, revocation, route, delivery mode. */
  private async verifiedDelivery(headers: DeliveryHeaders, verified: Verified, rawBody: Buffer, steps: StepTrace): Promise<WebhookAnswer> {
    const { metrics, logger } = this.deps;
    // Only now may the body be read as JSON: it is authentic.
    const parsed = parseEnvelope(rawBody);
    if (!parsed.ok) {
      this.count('rejected');
      metrics.rejections.inc({ reason: 'invalid_envelope' });
      logger.warn(
        { event: 'webhook_rejected', reason: 'invalid_envelope', detail: parsed.detail, deliveryId: deliveryIdOf(headers['x-service-delivery-id']) },
        'verified webhook body is not a valid envelope',
      );
      return { status: 400, outcome: 'rejected', reason: 'invalid_envelope', then: 'keep' };
    }
    const envelope = parsed.envelope;

    // Whether the other replicas learned of a revocation; settled before we answer (null: none to tell).
    let shared: Promise<boolean> | null = null;
    const revocation = revocationOf(envelope);
    if (revocation) {
      try {
        // Purges this replica before it returns; the promise is the other replicas'.
        shared = this.deps.revocations.publish(revocation).then(
          () => true,
          (err: unknown) => {
            logger.warn({ event: 'webhook_revocation_not_shared', eventId: logId(envelope.id), type: envelope.type, err }, 'revocation not shared with the other replicas');
            return false;
          },
        );
      } catch (err) {
        // A revocation that did not reach the cache must come back: refuse, and the service retries.
        logger.error({ event: 'webhook_revocation_failed', eventId: logId(envelope.id), type: envelope.type, err }, 'cache purge failed');
        this.count('failed');
        return { status: 503, outcome: 'failed', reason: 'revocation_failed', then: 'keep' };
      }
      metrics.revocations.inc({ scope: revocation.scope });
      // At most one line per scope a second (a tenant's stream may purge on every fourth event).
      const suppressed = this.revocationLog.admit(revocation.scope);
      if (suppressed !== undefined) {
        logger.info({ event: 'webhook_revocation', eventId: logId(envelope.id), type: envelope.type, scope: revocation.scope, suppressedSinceLast: suppressed }, 'cached decisions purged');
      }
    }

    const answer = await this.deliver(envelope, headers, verified, rawBody, steps);
    // The event still went its way (a revocation is also news for the app), but the other
    // replicas may serve the revoked ALLOW: answer 503 so the service retries, and the retry,
    // a duplicate by then, shares it again before it is answered 200.
    if (shared !== null && !(await shared) && answer.status === 200) return { status: 503, outcome: answer.outcome, reason: 'revocation_not_shared', then: answer.then };
    return answer;
  }

  private async deliver(envelope: WebhookEnvelope, headers: DeliveryHeaders, verified: Verified, rawBody: Buffer, steps: StepTrace): Promise<WebhookAnswer> {
    const deliveryId = deliveryIdOf(headers['x-service-delivery-id']);
    const routing = this.deps.routes.route(envelope.type);
    const target = routing.kind === 'forward' ? routing.target : null;
    // The log fields are built only for a line that is written (most deliveries write none).
    const log = (): Record<string, unknown> => ({ eventId: logId(envelope.id), type: envelope.type, sequence: envelope.sequence, deliveryId, ...(target ? { route: target.label } : {}) });
    if (routing.kind === 'ignored') {
      // Declared unwanted: acknowledged, not forwarded, and not deduplicated (a copy is ignored again).
      this.count('ignored');
      if (this.debug()) this.deps.logger.debug({ event: 'webhook_ignored', ...log(), ignore: routing.glob }, 'event type named by --app-webhook-ignore; not forwarded');
      return { status: 200, outcome: 'ignored', reason: 'ignored', then: 'keep' };
    }
    const facts = (outOfOrder: boolean): DeliveryFacts =>
      deliveryId !== undefined
        ? { eventId: envelope.id, timestamp: verified.timestamp, signature: verified.signature, deliveryId, outOfOrder }
        : { eventId: envelope.id, timestamp: verified.timestamp, signature: verified.signature, outOfOrder };
    this.deps.metrics.inFlight.inc();
    let result: DeliveryResult;
    try {
      result = await this.deps.mode.deliver({ envelope, facts, rawBody, target }, steps);
    } finally {
      this.deps.metrics.inFlight.dec();
    }
    switch (result.kind) {
      case 'accepted':
        this.count('accepted');
        // Debug only: an info line per event costs more than verifying it; the deliveries counter
        // and the forward histogram say the same in aggregate.
        if (this.debug()) this.deps.logger.debug({ event: result.reason === 'queued' ? 'webhook_queued' : 'webhook_accepted', ...log(), outOfOrder: result.outOfOrder, appStatus: result.appStatus }, `webhook ${result.reason === 'queued' ? 'queued' : 'forwarded'}`);
        return { status: 200, outcome: 'accepted', reason: result.reason, then: 'keep' };
      case 'unrouted':
        this.count('unrouted');
        this.logFailure(
          { event: 'webhook_unrouted', ...log(), cause: 'unrouted' },
          'no --app-webhook-route of this replica takes this event type and there is no --app-webhook-url: answered 503 so the service retries (a replica that routes it may take it)',
        );
        return { status: 503, outcome: 'unrouted', reason: 'unrouted', then: 'keep' };
      case 'duplicate':
        this.count('duplicate');
        if (this.debug()) this.deps.logger.debug({ event: 'webhook_duplicate', ...log() }, 'duplicate webhook not forwarded');
        return { status: 200, outcome: 'duplicate', reason: 'duplicate', then: 'keep' };
      case 'failed':
        this.count('failed');
        this.logFailure(
          { event: 'webhook_failed', ...log(), cause: result.cause, ...(result.detail !== undefined ? { detail: result.detail } : {}), ...(result.err !== undefined ? { err: result.err } : {}) },
          FAILURE_MESSAGE[result.reason],
          result.quiet ? 'info' : 'warn',
        );
        return { status: 503, outcome: 'failed', reason: result.reason, then: 'keep' };
    }
  }

  /** Debug lines are built only when they are written: a line per event costs more than the event. */
  private debug(): boolean {
    return this.deps.logger.isLevelEnabled('debug');
  }

  private rejectAuth(code: WebhookAuthErrorCode, headers: DeliveryHeaders, remoteAddress: string | undefined, then: WebhookAnswer['then']): WebhookAnswer {
    const reason = reasonLabel(code);
    this.count('rejected');
    this.deps.metrics.rejections.inc({ reason });
    this.logRejection({ event: 'webhook_rejected', reason, code, deliveryId: deliveryIdOf(headers['x-service-delivery-id']), remoteAddress }, 'webhook delivery not authenticated');
    return { status: 401, outcome: 'rejected', reason, then };
  }

  /** One line per cause per {@link REJECTION_LOG_INTERVAL_MS}, saying how many were held back. */
  private logFailure(fields: { cause: string } & Record<string, unknown>, message: string, level: 'warn' | 'info' | 'error' = 'warn'): void {
    const suppressed = this.failureLog.admit(fields.cause);
    if (suppressed !== undefined) this.deps.logger[level]({ ...fields, suppressedSinceLast: suppressed }, message);
  }

  /** One line per reason per {@link REJECTION_LOG_INTERVAL_MS}, saying how many were held back. */
  private logRejection(fields: { reason: string } & Record<string, unknown>, message: string): void {
    const suppressed = this.rejectionLog.admit(fields.reason);
    if (suppressed !== undefined) this.deps.logger.warn({ ...fields, suppressedSinceLast: suppressed }, message);
  }

  private count(outcome: DeliveryOutcome): void {
    let c = this.outcomes.get(outcome);
    if (!c) this.outcomes.set(outcome, (c = this.deps.metrics.deliveries.labels(outcome)));
    c.inc();
  }
}

const FAILURE_MESSAGE: Record<Extract<DeliveryResult, { kind: 'failed' }>['reason'], string> = {
  app_unavailable: 'app did not accept webhook',
  dedup_unavailable: 'webhook not forwarded: dedup could not be decided',
  queue_unavailable: 'webhook not queued',
  queue_full: 'webhook not queued: the queue holds --webhook-queue-max-events',
};
