import type { OptionSpec } from './option-spec.js';
import type { Reader } from './reader.js';

// Webhooks with Redis: how long a replica holds an event it forwards (the shared claim's lease, and
// the queue's visibility timeout), and the durable queue.

/** Added to `--webhook-forward-timeout-ms` for the default dedup claim lease (ms). */
export const DEFAULT_WEBHOOK_DEDUP_LEASE_MARGIN_MS = 5000;
/** Queue mode: how long an event is retried before it is dead-lettered (ms), 72 h. */
export const DEFAULT_WEBHOOK_QUEUE_HORIZON_MS = 259_200_000;
/** Queue mode: events the queue holds at most, and dead letters kept at most. */
export const DEFAULT_WEBHOOK_QUEUE_MAX_EVENTS = 100_000;

export const QUEUE_OPTIONS: readonly OptionSpec[] = [
  {
    name: 'webhook-dedup-lease-ms',
    arg: '<ms>',
    description: 'with Redis: how long a replica holds an event it forwards (must exceed --webhook-forward-timeout-ms)',
    defaultText: `forward timeout + ${DEFAULT_WEBHOOK_DEDUP_LEASE_MARGIN_MS}`,
  },
  {
    name: 'webhook-queue-horizon-ms',
    arg: '<ms>',
    description: 'queue mode: how long an event is retried before it is dead-lettered',
    defaultText: String(DEFAULT_WEBHOOK_QUEUE_HORIZON_MS),
  },
  {
    name: 'webhook-queue-max-events',
    arg: '<n>',
    description: 'queue mode: events waiting at most (beyond, 503 queue_full and the service retries), and dead letters kept at most',
    defaultText: String(DEFAULT_WEBHOOK_QUEUE_MAX_EVENTS),
  },
];

/** With Redis: the claim on an event a replica forwards, and the durable queue; part of {@link WebhookConfig}. */
export interface WebhookQueueConfig {
  /** With Redis: how long a claim on an event lives (ms); always more than `forwardTimeoutMs`. */
  readonly dedupLeaseMs: number;
  /** Queue mode: how long an event is retried before it is dead-lettered (ms), `--webhook-queue-horizon-ms`. */
  readonly queueHorizonMs: number;
  /** Queue mode: events waiting at most, and dead letters kept at most, `--webhook-queue-max-events`. */
  readonly queueMaxEvents: number;
}

/** `--webhook-dedup-lease-ms`, `--webhook-queue-*`: the lease is checked against the forward's timeout. */
export function readQueue(r: Reader, forwardTimeoutMs: number): WebhookQueueConfig {
  const dedupLeaseMs = readDedupLease(r, forwardTimeoutMs);
  const queueHorizonMs = r.int('webhook-queue-horizon-ms', DEFAULT_WEBHOOK_QUEUE_HORIZON_MS, 1, 365 * 86_400_000);
  const queueMaxEvents = r.int('webhook-queue-max-events', DEFAULT_WEBHOOK_QUEUE_MAX_EVENTS, 1, 100_000_000);
  return { dedupLeaseMs, queueHorizonMs, queueMaxEvents };
}

/** The claim must outlive a forward, or a second replica could forward the same event meanwhile. */
function readDedupLease(r: Reader, forwardTimeoutMs: number): number {
  const raw = r.raw('webhook-dedup-lease-ms');
  const leaseMs = r.int('webhook-dedup-lease-ms', forwardTimeoutMs + DEFAULT_WEBHOOK_DEDUP_LEASE_MARGIN_MS, 1, 3_600_000);
  if (raw && leaseMs <= forwardTimeoutMs && !r.problems.some((p) => p.startsWith(raw.label))) {
    r.problem(raw.label, `must exceed --webhook-forward-timeout-ms (${forwardTimeoutMs}), got ${leaseMs}`);
  }
  return leaseMs;
}
