import { performance } from 'node:perf_hooks';
import type { Logger } from '../observability/index.js';
import { RateLimiter } from '../observability/rate-limited-log.js';
import { logId } from './event-id.js';
import type { AppClient } from './app-client.js';
import type { AppRoutes, AppTarget, Routing } from './app-routes.js';
import type { DeliveredRecord } from './delivered-record.js';
import { ForwardClaims, type ForwardClaimStep } from './forward-claim.js';
import type { MarkerMacs } from './markers.js';
import type { QueueMetrics } from './metrics.js';
import type { QueueEntry, QueueStore } from './queue-store.js';
import type { RouterDirectory } from './queue-routers.js';
import { deadSubject, replayOf, reverify, type Reverified, type StoredDelivery } from './stored-delivery.js';

/** First retry delay (ms); doubles per attempt (±20 % jitter) up to {@link QUEUE_BACKOFF_MAX_MS}. */
export const QUEUE_BACKOFF_MIN_MS = 1000;
/** Longest retry delay (ms): 5 minutes. */
export const QUEUE_BACKOFF_MAX_MS = 300_000;
/** At most one line per kind (retry cause, mismatch) per this interval (ms); the rest are counted. */
const EVENT_LOG_INTERVAL_MS = 1000;

/** Delay before attempt `attempts + 1` (ms), after `attempts` failures (≥ 1). */
export function backoffMs(attempts: number, random: () => number = Math.random, minMs = QUEUE_BACKOFF_MIN_MS, maxMs = QUEUE_BACKOFF_MAX_MS): number {
  const base = minMs * 2 ** Math.min(Math.max(attempts, 1) - 1, 30);
  return Math.round(Math.min(maxMs, base * (0.8 + 0.4 * random())));
}

/**
 * Waiting for another entry of the same event to be forwarded, a copy is parked this long (ms)
 * after that entry's claim ends at the latest: by then it was delivered (and the copy is dropped)
 * or let go.
 */
const IN_FLIGHT_SLACK_MS = 1000;

/** What became of one entry a worker handled (the forwards counter's outcome). */
export type HandledOutcome =
  | 'unreadable'
  | 'signature_mismatch'
  | 'expired'
  | 'delivered'
  | 'retry_scheduled'
  | 'dead_lettered'
  | 'read_too_late'
  | 'ignored'
  | 'handed_over'
  /** A hand-over found the entry no longer this consumer's: the one that took it over decides. */
  | 'not_ours'
  | 'awaiting_route'
  | 'unrouted'
  | 'already_delivered'
  | 'in_flight'
  | 'claim_unknown';

export interface QueueDeliveryOptions {
  readonly store: QueueStore;
  /** The consumer the worker reads as: only an entry still pending with it is parked or dead-lettered. */
  readonly consumer: string;
  /** The visibility (ms): also the lease of the claim each forward holds. */
  readonly visibilityMs: number;
  /** `--webhook-forward-timeout-ms`. */
  readonly forwardTimeoutMs: number;
  readonly logger: Logger;
  readonly metrics: QueueMetrics;
  /** The wing's one app client, and the routes by event type it posts to. */
  readonly app: AppClient;
  readonly routes: AppRoutes;
  /** The fleet's route tables: where an entry this replica's routes do not take may go. */
  readonly routers: Pick<RouterDirectory, 'forwarderOf'>;
  /** Forwards by route and outcome (shared with passthrough). */
  readonly routeForwards: { labels(route: string, outcome: string): { inc(): void } };
  readonly secrets: () => readonly string[];
  readonly horizonMs: number;
  /** The horizon plus the signature tolerance: no stored delivery older than this (from its signed timestamp) is forwarded. */
  readonly maxAgeMs: number;
  /** How long the delivered marker lives (ms). */
  readonly markerTtlMs: number;
  /** Deliveries known (markers, and this process's memory of every replica's). */
  readonly record: DeliveredRecord;
  /** The replay marks' MACs. */
  readonly macs: MarkerMacs;
  readonly now: () => number;
  /** Forwarded and accepted by the app, not yet recorded in the store: entry id → event id (the worker's). */
  readonly unrecorded: Map<string, string>;
}

/**
 * What becomes of one queue entry a worker took (see `QueueWorker`): verified again, the event
 * claimed (see {@link ForwardClaims}), then forwarded, and marked delivered, parked for a retry,
 * or dead-lettered; an unreadable entry dropped, one that does not verify dead-lettered as
 * `signature_mismatch`, never forwarded; a copy of an event another entry is forwarding parked
 * until that forward has ended (`in_flight`).
 */
export class QueueDelivery {
  /** An app down with thousands of events waiting must not turn every retry into a log line. */
  private readonly eventLog = new RateLimiter(EVENT_LOG_INTERVAL_MS);
  private readonly claims: ForwardClaims;
  /** Event ids this process is forwarding now. */
  private readonly forwarding = new Set<string>();

  constructor(private readonly o: QueueDeliveryOptions) {
    this.claims = new ForwardClaims({
      store: o.store,
      macs: o.macs,
      consumer: o.consumer,
      leaseMs: o.visibilityMs,
      forwardTimeoutMs: o.forwardTimeoutMs,
      mismatches: o.metrics.markerMismatches,
      logger: o.logger,
    });
  }

  async dropDelivered(entry: QueueEntry, stored: StoredDelivery): Promise<void> {
    await this.o.store.drop(entry.entryId, stored.id);
    this.o.metrics.forwards.inc({ outcome: 'already_delivered' });
    this.o.logger.info({ event: 'webhook_queue_duplicate', eventId: logId(stored.id), attempts: stored.attempts }, 'queued event delivered before; dropped');
  }

  /**
   * Handles one entry; resolves to what became of it (the `outcome` it was counted under).
   * `startBy` (`performance.now()` time): the last moment a forward may start and still end inside
   * the entry's visibility; later, the entry is left pending with this consumer, not forwarded
   * (`read_too_late`), for the worker to read it again with a fresh visibility.
   */
  async handle(entry: QueueEntry, stored: StoredDelivery | null, startBy = Infinity): Promise<HandledOutcome> {
    const { store, metrics, logger } = this.o;
    if (!stored) {
      // Not an entry of ours (or unreadable): never forwarded, never retried.
      metrics.forwards.inc({ outcome: 'unreadable' });
      logger.error({ event: 'webhook_queue_bad_entry', entryId: entry.entryId }, 'unreadable queue entry dropped');
      await store.drop(entry.entryId);
      return 'unreadable';
    }
    const replay = replayOf(stored, this.o.macs);
    // A replay mark that fails its MAC is none (counted): the age counts from the signature then.
    if (replay === 'invalid') metrics.markerMismatches.inc({ marker: 'replay' });
    const checked = reverify(stored, this.o.secrets(), { nowMs: this.o.now(), maxAgeMs: this.o.maxAgeMs, replayedAt: typeof replay === 'number' ? replay : null });
    if (!checked.ok) return this.park(entry.entryId, stored, checked.reason, checked.reason);
    if (performance.now() > startBy) return this.tooLate(entry.entryId, stored);
    const routing = this.o.routes.route(checked.envelope.type);
    if (routing.kind !== 'forward') return this.leave(entry.entryId, stored, checked.envelope.type, routing);
    const target = routing.target;
    const claim = await this.claim(entry, stored);
    if (claim.kind !== 'claimed') return this.notClaimed(entry, stored, claim);
    // Kept: read again, this entry claims again under the same token.
    if (performance.now() > startBy) return this.tooLate(entry.entryId, stored);
    // Another entry of it started here while the claim was asked (its claim deleted by a writer meanwhile).
    if (this.forwarding.has(stored.id)) return this.notClaimed(entry, stored, { kind: 'busy', remainingMs: this.o.visibilityMs });
    this.forwarding.add(stored.id);
    let outcome: HandledOutcome | undefined;
    try {
      outcome = await this.forward(entry, stored, checked, target);
      return outcome;
    } finally {
      this.forwarding.delete(stored.id);
      // The app has it (recorded or not yet): the claim stays until the delivered marker stands
      // or its lease ends. Otherwise the next attempt may claim at once.
      if (outcome !== 'delivered' && !this.o.unrecorded.has(entry.entryId)) await this.claims.release(stored.id, claim.token);
    }
  }

  /**
   * One entry of an event forwarded at a time, and none once it was delivered: a copy added to the
   * queue is read beside the entry it copies, and both may have passed the delivered check. This
   * process's own forwards and memory first (no round trip, and nothing a writer can delete), then
   * the claim in the store, which every replica sees.
   */
  private async claim(entry: QueueEntry, stored: StoredDelivery): Promise<ForwardClaimStep> {
    if (this.forwarding.has(stored.id)) return { kind: 'busy', remainingMs: this.o.visibilityMs };
    if (this.o.record.remembers(stored.id)) return { kind: 'delivered' };
    return this.claims.claim(entry.entryId, stored.id);
  }

  private async forward(entry: QueueEntry, stored: StoredDelivery, checked: Reverified, target: AppTarget): Promise<HandledOutcome> {
    const { store, metrics, logger } = this.o;
    const result = await this.o.app.forward(target.url, checked.body, checked.headers);
    this.o.routeForwards.labels(target.label, result.ok ? 'accepted' : 'failed').inc();
    const log = { eventId: logId(stored.id), type: checked.envelope.type, attempts: stored.attempts, route: target.label };
    if (result.ok) {
      this.o.unrecorded.set(entry.entryId, stored.id);
      await this.recordOne(entry.entryId, stored.id);
      metrics.forwards.inc({ outcome: 'delivered' });
      // Debug: one line per event costs more than the event; the forwards counter says it in aggregate.
      logger.debug({ event: 'webhook_accepted', ...log, appStatus: result.status, queuedMs: this.o.now() - stored.acceptedAt }, 'queued webhook forwarded');
      return 'delivered';
    }
    const now = this.o.now();
    const attempts = stored.attempts + 1;
    const failed: StoredDelivery = { ...stored, attempts, lastError: result.detail };
    const horizonEnd = stored.acceptedAt + this.o.horizonMs;
    if (now >= horizonEnd) return this.park(entry.entryId, failed, result.detail, 'dead_lettered');
    // The last try falls on the horizon itself.
    const dueAt = Math.min(now + backoffMs(attempts), horizonEnd);
    await store.retryLater(this.o.consumer, entry.entryId, dueAt, JSON.stringify(failed));
    metrics.forwards.inc({ outcome: 'retry_scheduled' });
    const suppressed = this.eventLog.admit(`retry:${result.cause}`);
    if (suppressed !== undefined) {
      logger.info(
        { event: 'webhook_retry_scheduled', ...log, attempts, cause: result.cause, detail: result.detail, retryInMs: dueAt - now, suppressedSinceLast: suppressed },
        'app did not accept queued webhook; retry scheduled',
      );
    }
    return 'retry_scheduled';
  }

  /**
   * No route of this replica takes the entry's type. It is not this replica's to drop while another
   * may forward it, since replicas of one fleet may differ (a rollout): it goes to a live replica
   * whose routes take it (`handed_over`), until the horizon, which a hand-over never extends. Declared
   * unwanted here and by every live table (`ignored`): removed. Otherwise it waits in the queue for a
   * replica that takes it without spending an attempt (`awaiting_route`, its own backoff; any
   * replica reads it again when due), and at the horizon becomes a dead letter `unrouted`, marked for
   * a replay. Tables that cannot be read (a Redis error, a slow answer) are not known to name nobody:
   * the entry waits, and is not removed.
   */
  private async leave(entryId: string, stored: StoredDelivery, type: string, routing: Exclude<Routing, { kind: 'forward' }>): Promise<HandledOutcome> {
    const { store, metrics, logger } = this.o;
    let to: string | null | undefined;
    try {
      to = await this.o.routers.forwarderOf(type);
    } catch (err) {
      to = undefined;
      const suppressed = this.eventLog.admit('routes_unreadable');
      if (suppressed !== undefined) logger.warn({ event: 'webhook_queue_routes_unreadable', err, suppressedSinceLast: suppressed }, 'the fleet\'s route tables could not be read: the queued event waits');
    }
    const now = this.o.now();
    const horizonEnd = stored.acceptedAt + this.o.horizonMs;
    if (typeof to === 'string' && now < horizonEnd) {
      if (!(await store.handOver(this.o.consumer, entryId, to))) return 'not_ours';
      metrics.forwards.inc({ outcome: 'handed_over' });
      return 'handed_over';
    }
    if (routing.kind === 'ignored' && to === null) {
      await store.drop(entryId, stored.id);
      metrics.forwards.inc({ outcome: 'ignored' });
      logger.debug({ event: 'webhook_ignored', eventId: logId(stored.id), type, ignore: routing.glob }, 'queued event of a type --app-webhook-ignore names; removed, not forwarded');
      return 'ignored';
    }
    if (now >= horizonEnd) return this.park(entryId, stored, 'unrouted', 'unrouted');
    const routeWaits = (stored.routeWaits ?? 0) + 1;
    const dueAt = Math.min(now + backoffMs(routeWaits), horizonEnd);
    await store.retryLater(this.o.consumer, entryId, dueAt, JSON.stringify({ ...stored, routeWaits }));
    metrics.forwards.inc({ outcome: 'awaiting_route' });
    const suppressed = this.eventLog.admit('awaiting_route');
    if (suppressed !== undefined) {
      logger.warn(
        { event: 'webhook_queue_unrouted', eventId: logId(stored.id), type, routeWaits, retryInMs: dueAt - now, suppressedSinceLast: suppressed },
        'no live replica has a route for this queued event type (--app-webhook-route, --app-webhook-url): left waiting, dead-lettered unrouted at the horizon',
      );
    }
    return 'awaiting_route';
  }

  /**
   * No claim for this forward: the event was delivered (dropped); another entry of it is being
   * forwarded (parked until that forward has ended, never beside it); or the claim's outcome is
   * unknown or came too late (nothing moved: the entry stays pending with this consumer, which
   * reads it again).
   */
  private async notClaimed(entry: QueueEntry, stored: StoredDelivery, claim: Exclude<ForwardClaimStep, { kind: 'claimed' }>): Promise<HandledOutcome> {
    const { store, metrics } = this.o;
    switch (claim.kind) {
      case 'delivered':
        this.o.record.remember(stored.id);
        await this.dropDelivered(entry, stored);
        return 'already_delivered';
      case 'busy':
        await store.retryLater(this.o.consumer, entry.entryId, this.o.now() + claim.remainingMs + IN_FLIGHT_SLACK_MS, entry.json ?? JSON.stringify(stored));
        metrics.forwards.inc({ outcome: 'in_flight' });
        this.note('in_flight', stored, entry.entryId, 'another entry of this event is being forwarded (a copy in the queue); parked until that forward has ended');
        return 'in_flight';
      case 'too_late':
        return this.tooLate(entry.entryId, stored);
      case 'unknown':
        metrics.forwards.inc({ outcome: 'claim_unknown' });
        this.note('claim_unknown', stored, entry.entryId, `the claim before its forward was not answered (${(claim.err as Error)?.message ?? String(claim.err)}); not forwarded, read again`);
        return 'claim_unknown';
    }
  }

  /** One warning line per kind per interval; the forwards counter says how many. */
  private note(kind: string, stored: StoredDelivery, entryId: string, message: string): void {
    const suppressed = this.eventLog.admit(kind);
    if (suppressed !== undefined) this.o.logger.warn({ event: `webhook_queue_${kind}`, eventId: logId(stored.id), entryId, suppressedSinceLast: suppressed }, `queued event: ${message}`);
  }

  /**
   * Redis made the entry ours when it ran the read; the answer reached us so late (this process
   * stalled: a GC pause, CPU throttling, a frozen VM) that a forward could outlive the visibility,
   * and another replica take the entry over and forward it too. Not forwarded; nothing moved.
   */
  private tooLate(entryId: string, stored: StoredDelivery): 'read_too_late' {
    this.o.metrics.forwards.inc({ outcome: 'read_too_late' });
    const suppressed = this.eventLog.admit('read_too_late');
    if (suppressed !== undefined) {
      this.o.logger.warn(
        { event: 'webhook_queue_read_too_late', eventId: logId(stored.id), entryId, suppressedSinceLast: suppressed },
        'queued event read too late to forward it inside its visibility (this process stalled); read again, not forwarded now',
      );
    }
    return 'read_too_late';
  }

  /**
   * A dead letter: past the horizon (`dead_lettered`, or `unrouted` when no replica routed it; both
   * marked for a replay), an entry that does not verify (`signature_mismatch`), or one signed
   * longer ago than the queue may hold it (`expired`).
   */
  private async park<O extends 'signature_mismatch' | 'expired' | 'dead_lettered' | 'unrouted'>(entryId: string, stored: StoredDelivery, lastError: string, outcome: O): Promise<O> {
    const { store, metrics, logger } = this.o;
    const deadAt = this.o.now();
    // The mark `dead-letters replay` asks for, given only to what the app refused or no route took
    // until the horizon: an `expired` or `signature_mismatch` entry is never forwarded, a replay included.
    const replayable = outcome === 'dead_lettered' || outcome === 'unrouted';
    const deadMac = replayable ? this.o.macs.sign('dead', deadSubject(stored, deadAt)) : undefined;
    const dead: StoredDelivery = { ...stored, lastError, deadAt, deadMac };
    await store.deadLetter(this.o.consumer, entryId, stored.id, JSON.stringify(dead));
    metrics.forwards.inc({ outcome });
    if (outcome === 'unrouted') {
      logger.warn({ event: 'webhook_dead_lettered', eventId: logId(stored.id), attempts: stored.attempts, lastError }, 'no replica routed this queued event type until --webhook-queue-horizon-ms; dead-lettered (replay it once a route exists)');
      return outcome;
    }
    if (!replayable) {
      const suppressed = this.eventLog.admit(outcome);
      if (suppressed !== undefined) {
        const why =
          outcome === 'expired'
            ? 'signed longer ago than --webhook-queue-horizon-ms plus the tolerance (a copy added back to Redis?)'
            : 'does not verify against the current secrets (altered in Redis, or signed with a secret no longer configured)';
        logger.error({ event: `webhook_queue_${outcome}`, eventId: logId(stored.id), entryId, suppressedSinceLast: suppressed }, `queued entry ${why}; dead-lettered, not forwarded`);
      }
      return outcome;
    }
    logger.warn({ event: 'webhook_dead_lettered', eventId: logId(stored.id), attempts: stored.attempts, lastError }, 'webhook retried past --webhook-queue-horizon-ms; dead-lettered');
    return outcome;
  }

  /** Records one delivery; kept in {@link unrecorded} when the store does not answer (retried each pump). */
  private async recordOne(entryId: string, eventId: string): Promise<void> {
    this.o.record.remember(eventId);
    await this.o.store.markDelivered(entryId, eventId, this.o.markerTtlMs, this.o.record.mac(eventId));
    this.o.unrecorded.delete(entryId);
  }

  /** Records what the app accepted and the store did not hear of yet (entries `busy` says are being handled excepted). */
  async recordDelivered(busy: (entryId: string) => boolean): Promise<void> {
    for (const [entryId, eventId] of [...this.o.unrecorded]) if (!busy(entryId)) await this.recordOne(entryId, eventId);
  }
}
