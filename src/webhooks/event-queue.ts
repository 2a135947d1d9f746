import type { DeliveryFacts } from './stored-delivery.js';

/** A verified event for the queue: what the delivery carried (stored as received) and the raw body. */
export interface QueuedEvent {
  readonly facts: DeliveryFacts;
  /** The raw body, unchanged. */
  readonly body: Buffer;
}

/** `queued`: stored now; `duplicate`: accepted before (not stored again); `full`: the queue holds its most (503). */
export type EnqueueResult = 'queued' | 'duplicate' | 'full';

/**
 * The durable queue behind `--webhook-delivery queue` (contract, Webhooks). The ingress answers 200
 * only once {@link enqueue} resolved `queued` or `duplicate`: the event is in the queue's store then
 * (and on the configured number of Redis replicas). The queue also deduplicates, in the same atomic
 * step as the store; the ingress does not claim in the dedup store in this mode.
 */
export interface EventQueue {
  /** Rejects when the event is not known to be stored (the ingress answers 503). */
  enqueue(event: QueuedEvent): Promise<EnqueueResult>;
}
