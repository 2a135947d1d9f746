import { UNTRACED_STEPS, type StepTrace } from '../lib/trace.js';
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import { RateLimiter } from '../observability/rate-limited-log.js';
import type { RequiredHeader, WebhookConfig } from '../config/index.js';
import { hasCode } from '../lib/errors.js';
import type { RevocationPublisher } from '../lib/revocation-hook.js';
import type { DedupStore } from './dedup-store.js';
import type { EnqueueResult, EventQueue } from './event-queue.js';
import { parseEnvelope, type WebhookEnvelope } from './envelope.js';
import { reasonLabel, type WebhookAuthErrorCode } from './errors.js';
import { logId } from './event-id.js';
import type { Forwarder } from './forwarder.js';
import { secretIndexLabel, type DeliveryOutcome, type WebhookMetrics } from './metrics.js';
import { revocationOf } from './revocations.js';
import { SequenceTracker } from './sequence-tracker.js';
import { appHeaders, deliveryIdOf, type DeliveryFacts } from './stored-delivery.js';
import { checkDeliveryHeaders, type CheckedHeaders, type DeliveryHeaders, type Verified, type VerifyResult } from './verify.js';

/** Reasons a delivery is refused outside authentication (label values of the rejections counter). */
export const ROUTE_REJECTIONS = ['not_found', 'method_not_allowed', 'body_too_large', 'unverified_budget_exhausted', 'body_timeout'] as const;
export type RouteRejection = (typeof ROUTE_REJECTIONS)[number];

/** At most one log line per reason (rejections, failures) per interval (ms); the rest are counted. */
export const REJECTION_LOG_INTERVAL_MS = 1000;

/** What a delivery's log lines say about it. */
interface LogFields {
  readonly eventId: string;
  readonly type: string;
  readonly sequence: number;
  readonly deliveryId: string | undefined;
}

/** What the listener answers the service. */
export interface IngressAnswer {
  readonly status: 200 | 400 | 401 | 503;
  readonly outcome: DeliveryOutcome;
  /** Short machine reason for the response body (`timestamp_too_old`, `app_unavailable`, …). */
  readonly reason: string;
}

export interface WebhookIngressDeps {
  readonly config: WebhookConfig;
  readonly logger: Logger;
  readonly metrics: WebhookMetrics;
  readonly dedup: DedupStore;
  readonly forwarder: Forwarder;
  /** Where revocations go: this replica's cache, and with several replicas every other one's. */
  readonly revocations: RevocationPublisher;
  /** Queue mode: accepted events go here instead of to the app (200 once stored). */
  readonly queue?: EventQueue;
  /** Epoch ms. */
  readonly now: () => number;
}

/**
 * The delivery pipeline, in the order the contract fixes: verify (headers, then raw body), check the
 * envelope, purge revoked decisions, deduplicate, forward, answer. Transport-free: the listener
 * reads the body and writes the answer.
 */
export class WebhookIngress {
  private readonly sequences: SequenceTracker;
  /** Unauthenticated senders choose how often they are refused: the logs must not follow them. */
  private readonly rejectionLog: RateLimiter;
  private readonly revocationLog: RateLimiter;
  /** A dead app or a slow store fails every delivery: one line per cause per interval. */
  private readonly failureLog: RateLimiter;
  private readonly outcomes = new Map<DeliveryOutcome, { inc(): void }>();

  constructor(private readonly deps: WebhookIngressDeps) {
    this.sequences = new SequenceTracker(deps.metrics);
    // On the ingress's own clock, like every other time decision here.
    this.rejectionLog = new RateLimiter(REJECTION_LOG_INTERVAL_MS, deps.now);
    this.revocationLog = new RateLimiter(1000, deps.now);
    this.failureLog = new RateLimiter(REJECTION_LOG_INTERVAL_MS, deps.now);
  }

  /**
   * The checks that need no body. A failure is final (401) and counted here, so the listener can
   * answer without reading a byte of an unauthenticated body. `requiredHeader` is the one the
   * listener picked `headers` by, read once for both (a rotation in between would refuse the delivery).
   */
  checkHeaders(headers: DeliveryHeaders, remoteAddress?: string, requiredHeader: RequiredHeader | null = this.deps.config.requiredHeader?.current() ?? null): CheckedHeaders | IngressAnswer {
    const { config, now } = this.deps;
    const checked = checkDeliveryHeaders(headers, { toleranceS: config.toleranceS, nowMs: now(), requiredHeader });
    if (checked.skewS !== undefined) this.deps.metrics.timestampSkew.observe(checked.skewS);
    if (checked.ok) return checked;
    return this.rejectAuth(checked.code, headers, remoteAddress);
  }

  /** Counts a refusal decided by the listener (route, size, unverified budget, body deadline). */
  rejectRoute(reason: RouteRejection, remoteAddress?: string): void {
    this.count('rejected');
    this.deps.metrics.rejections.inc({ reason });
    this.logRejection({ event: 'webhook_rejected', reason, remoteAddress }, 'webhook delivery rejected');
  }

  /**
   * Handles a body whose signature was checked as it arrived (`verified`, from
   * {@link startBodyVerification}): refused unless verified, then envelope, revocation, dedup,
   * forward. Never throws.
   */
  async receiveVerified(headers: DeliveryHeaders, verified: VerifyResult, rawBody: Buffer, remoteAddress?: string, steps: StepTrace = UNTRACED_STEPS): Promise<IngressAnswer> {
    const { metrics, logger } = this.deps;
    if (!verified.ok) return this.rejectAuth(verified.code, headers, remoteAddress);
    metrics.secretMatches.inc({ index: secretIndexLabel(verified.secretIndex) });

    // Only now may the body be read as JSON: it is authentic.
    const parsed = parseEnvelope(rawBody);
    if (!parsed.ok) {
      this.count('rejected');
      metrics.rejections.inc({ reason: 'invalid_envelope' });
      logger.warn(
        { event: 'webhook_rejected', reason: 'invalid_envelope', detail: parsed.detail, deliveryId: deliveryIdOf(headers['x-service-delivery-id']) },
        'verified webhook body is not a valid envelope',
      );
      return { status: 400, outcome: 'rejected', reason: 'invalid_envelope' };
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
        return { status: 503, outcome: 'failed', reason: 'revocation_failed' };
      }
      metrics.revocations.inc({ scope: revocation.scope });
      // At most one line per scope a second (a tenant's stream may purge on every fourth event).
      const suppressed = this.revocationLog.admit(revocation.scope);
      if (suppressed !== undefined) {
        logger.info({ event: 'webhook_revocation', eventId: logId(envelope.id), type: envelope.type, scope: revocation.scope, suppressedSinceLast: suppressed }, 'cached decisions purged');
      }
    }

    metrics.inFlight.inc();
    try {
      const answer = await this.deliver(envelope, verified, headers, rawBody, steps);
      // The event still went its way (a revocation is also news for the app), but the other
      // replicas may serve the revoked ALLOW: answer 503 so the service retries, and the retry,
      // a duplicate by then, shares it again before it is answered 200.
      if (shared !== null && !(await shared) && answer.status === 200) return { status: 503, outcome: answer.outcome, reason: 'revocation_not_shared' };
      return answer;
    } catch (err) {
      // A store that did not answer (Redis slow) means we cannot promise "at most once": the service retries.
      const slow = hasCode(err, 'ERR_WEBHOOK_DEDUP_UNKNOWN');
      this.logFailure({ event: 'webhook_failed', eventId: logId(envelope.id), cause: slow ? 'dedup_unknown' : 'internal', ...(slow ? {} : { err }) }, 'webhook not forwarded: dedup could not be decided');
      this.count('failed');
      return { status: 503, outcome: 'failed', reason: 'dedup_unavailable' };
    } finally {
      metrics.inFlight.dec();
    }
  }

  private async deliver(envelope: WebhookEnvelope, verified: Verified, headers: DeliveryHeaders, rawBody: Buffer, steps: StepTrace): Promise<IngressAnswer> {
    const { dedup } = this.deps;
    const deliveryId = deliveryIdOf(headers['x-service-delivery-id']);
    // The log fields are built only for a line that is written (most deliveries write none).
    const log = (): LogFields => ({ eventId: logId(envelope.id), type: envelope.type, sequence: envelope.sequence, deliveryId });
    const facts = (outOfOrder: boolean): DeliveryFacts =>
      deliveryId !== undefined
        ? { eventId: envelope.id, timestamp: verified.timestamp, signature: verified.signature, deliveryId, outOfOrder }
        : { eventId: envelope.id, timestamp: verified.timestamp, signature: verified.signature, outOfOrder };
    if (this.deps.queue) return this.enqueue(this.deps.queue, envelope, facts, rawBody, log, steps);
    const claim = await steps.step('dedup', () => dedup.claim(envelope.id));

    if (claim.kind === 'duplicate') return this.duplicate(log);
    if (claim.kind === 'in_flight') {
      // Wait for the first copy. If it fails we answer 503 rather than forward again at once: the
      // app just failed or timed out on this very event, an immediate second try would pile onto
      // it (and could keep the service waiting two timeouts), and the service retries with backoff.
      const outcome = await claim.outcome;
      if (outcome === 'accepted') return this.duplicate(log);
      this.count('failed');
      this.logFailure({ event: 'webhook_failed', ...log(), cause: 'first_copy_failed' }, 'webhook copy not accepted', 'info');
      return { status: 503, outcome: 'failed', reason: 'app_unavailable' };
    }

    let settled = false;
    try {
      const outOfOrder = this.sequences.observe(envelope.sequence);
      const started = performance.now();
      const result = await steps.step('forward', () => this.deps.forwarder.forward(rawBody, appHeaders(facts(outOfOrder))));
      this.deps.metrics.forwardDuration.observe(result.ok ? 0 : 1, (performance.now() - started) / 1000);
      if (result.ok) {
        await dedup.markAccepted(envelope.id, claim.token);
        settled = true;
        this.count('accepted');
        // Debug only: an info line per event costs more than verifying it (issue 14); the
        // deliveries counter and the forward histogram say the same in aggregate.
        if (this.debug()) this.deps.logger.debug({ event: 'webhook_accepted', ...log(), outOfOrder, appStatus: result.status }, 'webhook forwarded');
        return { status: 200, outcome: 'accepted', reason: 'accepted' };
      }
      this.deps.metrics.forwardFailures.inc({ cause: result.cause });
      this.count('failed');
      this.logFailure({ event: 'webhook_failed', ...log(), cause: result.cause, detail: result.detail }, 'app did not accept webhook');
      return { status: 503, outcome: 'failed', reason: 'app_unavailable' };
    } finally {
      if (!settled) await dedup.release(envelope.id, claim.token);
    }
  }

  /** Queue mode: accepted once the queue stored it; the queue deduplicates in the same step. */
  private async enqueue(
    queue: EventQueue,
    envelope: WebhookEnvelope,
    facts: (outOfOrder: boolean) => DeliveryFacts,
    rawBody: Buffer,
    log: () => LogFields,
    steps: StepTrace,
  ): Promise<IngressAnswer> {
    const outOfOrder = this.sequences.isBehind(envelope.sequence);
    let result: EnqueueResult;
    try {
      result = await steps.step('enqueue', () => queue.enqueue({ facts: facts(outOfOrder), body: rawBody }));
    } catch (err) {
      this.count('failed');
      this.logFailure({ event: 'webhook_failed', ...log(), cause: 'queue_unavailable', err }, 'webhook not queued');
      return { status: 503, outcome: 'failed', reason: 'queue_unavailable' };
    }
    if (result === 'duplicate') return this.duplicate(log);
    if (result === 'full') {
      this.count('failed');
      this.logFailure({ event: 'webhook_failed', ...log(), cause: 'queue_full' }, 'webhook not queued: the queue holds --webhook-queue-max-events');
      return { status: 503, outcome: 'failed', reason: 'queue_full' };
    }
    this.sequences.observe(envelope.sequence);
    this.count('accepted');
    // Debug: a line per event would cost more than the event (the deliveries counter says it in aggregate).
    if (this.debug()) this.deps.logger.debug({ event: 'webhook_queued', ...log(), outOfOrder }, 'webhook queued');
    return { status: 200, outcome: 'accepted', reason: 'queued' };
  }

  private duplicate(log: () => LogFields): IngressAnswer {
    this.count('duplicate');
    if (this.debug()) this.deps.logger.debug({ event: 'webhook_duplicate', ...log() }, 'duplicate webhook not forwarded');
    return { status: 200, outcome: 'duplicate', reason: 'duplicate' };
  }

  /** Debug lines are built only when they are written: a line per event costs more than the event. */
  private debug(): boolean {
    return this.deps.logger.isLevelEnabled('debug');
  }

  private rejectAuth(code: WebhookAuthErrorCode, headers: DeliveryHeaders, remoteAddress?: string): IngressAnswer {
    const reason = reasonLabel(code);
    this.count('rejected');
    this.deps.metrics.rejections.inc({ reason });
    this.logRejection({ event: 'webhook_rejected', reason, code, deliveryId: deliveryIdOf(headers['x-service-delivery-id']), remoteAddress }, 'webhook delivery not authenticated');
    return { status: 401, outcome: 'rejected', reason };
  }

  /** One `webhook_failed` line per cause per {@link REJECTION_LOG_INTERVAL_MS}, saying how many were held back. */
  private logFailure(fields: { cause: string } & Record<string, unknown>, message: string, level: 'warn' | 'info' = 'warn'): void {
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
