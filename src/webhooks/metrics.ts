import { Counter, Gauge, Histogram, type Registry } from '../observability/prom.js';
import { FastHistogram, METRIC_PREFIX } from '../observability/index.js';

/**
 * `outcome` of `consent_sidecar_webhook_deliveries_total` (the contract's closed set, and: `ignored`,
 * verified, answered 200 and not forwarded because an `--app-webhook-ignore` glob names its type;
 * `unrouted`, verified and answered 503 in passthrough because no route of this replica takes its
 * type and there is no default).
 */
export type DeliveryOutcome = 'accepted' | 'duplicate' | 'rejected' | 'failed' | 'ignored' | 'unrouted';
/** Why the app did not accept a forwarded event. */
export type ForwardFailureCause = 'status' | 'timeout' | 'network';

/** Secrets beyond this position share one label value, so the label set stays bounded. */
const MAX_SECRET_INDEX_LABEL = 9;

/** Every webhook metric, declared against an injected registry (a fresh one per test). */
export interface WebhookMetrics {
  readonly deliveries: Counter<'outcome'>;
  readonly rejections: Counter<'reason'>;
  /** Observed per forward: a FastHistogram (label bound by index, no hashing per event). */
  readonly forwardDuration: FastHistogram<'accepted' | 'failed'>;
  readonly forwardFailures: Counter<'cause'>;
  /** Forwards by route (`--app-webhook-route` glob, or `default`) and outcome (accepted, failed), both modes. */
  readonly routeForwards: Counter<'route' | 'outcome'>;
  readonly timestampSkew: Histogram;
  readonly inFlight: Level;
  readonly highestSequence: Level;
  readonly outOfOrder: Counter;
  readonly secretMatches: Counter<'index'>;
  readonly revocations: Counter<'scope'>;
  /** Bytes of not-yet-verified bodies held right now, across all connections. */
  readonly unverifiedBytes: Level;
}

/**
 * A gauge whose value is a plain number, given to prom-client when scraped: what the ingress moves
 * on every delivery (in flight, unverified bytes, the highest sequence) costs an addition there.
 */
export class Level {
  private value = 0;

  constructor(registry: Registry, name: string, help: string) {
    const level = this;
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        this.set(level.value);
      },
    });
  }

  inc(): void {
    this.value++;
  }

  dec(): void {
    this.value--;
  }

  set(value: number): void {
    this.value = value;
  }
}

/** Label of a secret's position: `"0"`, `"1"`, … up to `"9+"`. */
export function secretIndexLabel(index: number): string {
  return index >= MAX_SECRET_INDEX_LABEL ? `${MAX_SECRET_INDEX_LABEL}+` : String(index);
}

export function createWebhookMetrics(registry: Registry): WebhookMetrics {
  const registers = [registry];
  return {
    deliveries: new Counter({
      name: `${METRIC_PREFIX}webhook_deliveries_total`,
      help: 'Webhook deliveries by outcome (accepted, duplicate, rejected, failed; ignored: a type --app-webhook-ignore names, 200; unrouted: no route of this replica takes its type, 503 in passthrough).',
      labelNames: ['outcome'],
      registers,
    }),
    rejections: new Counter({
      name: `${METRIC_PREFIX}webhook_rejections_total`,
      help: 'Webhook deliveries refused, by reason (401, 400, 413, 404/405 causes).',
      labelNames: ['reason'],
      registers,
    }),
    forwardDuration: new FastHistogram(
      `${METRIC_PREFIX}webhook_forward_duration_seconds`,
      'Time the app took to answer a forwarded event, by outcome (accepted, failed).',
      'outcome',
      ['accepted', 'failed'],
      [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registry,
    ),
    forwardFailures: new Counter({
      name: `${METRIC_PREFIX}webhook_forward_failures_total`,
      help: 'Forwards the app did not accept, by cause (status, timeout, network).',
      labelNames: ['cause'],
      registers,
    }),
    routeForwards: new Counter({
      name: `${METRIC_PREFIX}webhook_route_forwards_total`,
      help: 'Events forwarded to the app, by route (the --app-webhook-route glob, or default) and outcome (accepted, failed), in both delivery modes.',
      labelNames: ['route', 'outcome'],
      registers,
    }),
    timestampSkew: new Histogram({
      name: `${METRIC_PREFIX}webhook_timestamp_skew_seconds`,
      help: 'now - x-service-timestamp of deliveries with a numeric timestamp (s); negative when ahead of our clock.',
      buckets: [-300, -60, -10, -1, 0, 1, 5, 10, 30, 60, 120, 300],
      registers,
    }),
    inFlight: new Level(registry, `${METRIC_PREFIX}webhook_in_flight`, 'Deliveries being processed right now (verified and waiting on the app or on a first copy).'),
    highestSequence: new Level(registry, `${METRIC_PREFIX}webhook_highest_sequence`, 'Highest envelope sequence forwarded so far (gaps are normal).'),
    outOfOrder: new Counter({
      name: `${METRIC_PREFIX}webhook_out_of_order_total`,
      help: 'Events forwarded with a sequence lower than the highest seen.',
      registers,
    }),
    secretMatches: new Counter({
      name: `${METRIC_PREFIX}webhook_secret_matches_total`,
      help: 'Verified deliveries by position of the secret that matched (rotation progress).',
      labelNames: ['index'],
      registers,
    }),
    revocations: new Counter({
      name: `${METRIC_PREFIX}webhook_revocations_total`,
      help: 'Cache purges triggered by verified events, by scope (user, all).',
      labelNames: ['scope'],
      registers,
    }),
    unverifiedBytes: new Level(registry, `${METRIC_PREFIX}webhook_unverified_bytes`, 'Bytes of webhook bodies held right now whose signature is not verified yet (bounded by --webhook-max-unverified-bytes).'),
  };
}

/** Metrics of shared deduplication (several replicas), against an injected registry. */
export interface SharedDedupMetrics {
  /** Steps decided by this replica alone because the shared store was known unreachable. */
  readonly fallbacks: Counter<'op'>;
  /**
   * Claims not decided, and accepts not known to be recorded, because the store was slow, in a
   * failover, or away for less than a lease: answered 503, never forwarded on a guess (op: claim, accept).
   */
  readonly unknownOutcomes: Counter<'op'>;
  /** A holder settled a claim whose lease had lapsed (the lease is too short for the app). */
  readonly leaseLapses: Counter;
  /** Markers and announcements read back from Redis whose MAC did not verify, by marker. */
  readonly markerMismatches: Counter<'marker'>;
}

/**
 * Which kind of marker failed its check (`marker` label); `routes`: a replica's route table;
 * `claim`: a queue forward claim that was no replica's (forged, no TTL or more left than any lease,
 * a key of another type), taken over.
 */
export type MarkerMismatch = 'accepted' | 'announced' | 'delivered' | 'replay' | 'routes' | 'claim';

/**
 * `consent_sidecar_webhook_marker_mismatches_total`, declared once per registry (shared dedup and
 * the queue both count into it).
 */
export function markerMismatchCounter(registry: Registry): Counter<'marker'> {
  const name = `${METRIC_PREFIX}webhook_marker_mismatches_total`;
  const existing = registry.getSingleMetric(name);
  if (existing) return existing as Counter<'marker'>;
  const counter = new Counter({
    name,
    help: 'Markers read back from Redis whose MAC (keyed from the webhook secrets) did not verify, or that were not markers of ours at all (a key of another type), by marker (accepted, announced, delivered, replay, claim: each was taken as no marker, the event delivered; routes: a route table no entry is handed to).',
    labelNames: ['marker'],
    registers: [registry],
  });
  for (const marker of ['accepted', 'announced', 'delivered', 'replay', 'routes', 'claim'] satisfies MarkerMismatch[]) counter.labels(marker);
  return counter;
}

export function createSharedDedupMetrics(registry: Registry): SharedDedupMetrics {
  const registers = [registry];
  return {
    fallbacks: new Counter({
      name: `${METRIC_PREFIX}webhook_dedup_fallbacks_total`,
      help: 'Webhook dedup steps decided by this replica alone because Redis was down (silent longer than a lease, or refusing), by op (claim, accept, release).',
      labelNames: ['op'],
      registers,
    }),
    unknownOutcomes: new Counter({
      name: `${METRIC_PREFIX}webhook_dedup_unknown_outcomes_total`,
      help: 'Webhook dedup claims not decided, or accepts not known to be recorded, because Redis was slow, failing over or away for less than a lease (not down): the delivery got 503 and the service retries, by op (claim, accept).',
      labelNames: ['op'],
      registers,
    }),
    leaseLapses: new Counter({
      name: `${METRIC_PREFIX}webhook_dedup_lease_lapses_total`,
      help: 'Claims settled after their lease had lapsed (raise --webhook-dedup-lease-ms).',
      registers,
    }),
    markerMismatches: markerMismatchCounter(registry),
  };
}

/** What a worker did with an event it took: `outcome` label of the queue's forwards counter. */
export const QUEUE_FORWARD_OUTCOMES = [
  'delivered',
  'retry_scheduled',
  'dead_lettered',
  'already_delivered',
  'signature_mismatch',
  'expired',
  'oversized',
  'unreadable',
  'read_too_late',
  'ignored',
  'handed_over',
  'awaiting_route',
  'unrouted',
  'in_flight',
  'claim_unknown',
] as const;
export type QueueForwardOutcome = (typeof QUEUE_FORWARD_OUTCOMES)[number];

/** The queue's metrics (contract names for the three gauges), against an injected registry. */
export interface QueueMetrics {
  /** `consent_sidecar_webhook_queue_depth`: events waiting or being forwarded (all replicas). */
  readonly depth: Gauge;
  /** `consent_sidecar_webhook_queue_oldest_age_seconds`: age of the oldest event not yet delivered. */
  readonly oldestAge: Gauge;
  /** `consent_sidecar_webhook_dead_letters`: events parked past the horizon. */
  readonly deadLetters: Gauge;
  /** Entries taken by this replica's workers, by outcome. */
  readonly forwards: Counter<'outcome'>;
  /** Events refused at ingress because the queue held its most (`--webhook-queue-max-events`). */
  readonly full: Counter;
  /** Markers read back from Redis whose MAC did not verify, by marker. */
  readonly markerMismatches: Counter<'marker'>;
}

export function createQueueMetrics(registry: Registry): QueueMetrics {
  const registers = [registry];
  const forwards = new Counter({
    name: `${METRIC_PREFIX}webhook_queue_forwards_total`,
    help: 'Queue mode: entries taken by this replica, by outcome (delivered, retry_scheduled, dead_lettered, already_delivered, signature_mismatch, expired, oversized, unreadable, read_too_late; ignored: a type --app-webhook-ignore names, removed; handed_over: no route here takes it, given to a replica whose routes do; awaiting_route: no live replica routes it, parked without counting an attempt; unrouted: still so at the horizon, dead-lettered; in_flight: another entry of the event is being forwarded, parked until it ends; claim_unknown: the claim before the forward was not answered, read again).',
    labelNames: ['outcome'],
    registers,
  });
  for (const outcome of ['signature_mismatch', 'expired', 'oversized', 'unreadable', 'read_too_late', 'awaiting_route', 'unrouted', 'in_flight', 'claim_unknown'] satisfies QueueForwardOutcome[]) forwards.labels(outcome);
  return {
    depth: new Gauge({ name: `${METRIC_PREFIX}webhook_queue_depth`, help: 'Queue mode: events waiting or being forwarded (read from Redis, all replicas).', registers }),
    oldestAge: new Gauge({
      name: `${METRIC_PREFIX}webhook_queue_oldest_age_seconds`,
      help: 'Queue mode: age of the oldest event accepted and not yet delivered nor dead-lettered (0 when none).',
      registers,
    }),
    deadLetters: new Gauge({ name: `${METRIC_PREFIX}webhook_dead_letters`, help: 'Queue mode: events retried past --webhook-queue-horizon-ms, parked for replay.', registers }),
    forwards,
    full: new Counter({
      name: `${METRIC_PREFIX}webhook_queue_full_total`,
      help: 'Queue mode: deliveries answered 503 because the queue held --webhook-queue-max-events.',
      registers,
    }),
    markerMismatches: markerMismatchCounter(registry),
  };
}
