/** A verified event ready for the app: the headers to forward (built at ingress) and the raw body. */
export interface QueuedEvent {
  /** Envelope `id`. */
  readonly id: string;
  /** Envelope `type`, for listings. */
  readonly type: string;
  /** Exactly the headers a passthrough forward would send (service headers + `x-consent-sidecar-verified`). */
  readonly headers: Readonly<Record<string, string>>;
  /** The raw body, unchanged. */
  readonly body: Buffer;
}

/** `queued`: stored now; `duplicate`: an event with this id was accepted before (not stored again). */
export type EnqueueResult = 'queued' | 'duplicate';

/**
 * The durable queue behind `--webhook-delivery queue` (contract, Webhooks). The ingress answers 200
 * only once {@link enqueue} resolved: the event is in the queue's store then. The queue also
 * deduplicates (in the same atomic step as the store, so two copies arriving at two replicas at
 * once cannot both be queued); the ingress does not claim in the dedup store in this mode. The
 * composition root plugs the Redis streams implementation in (src/redis/); the ingress never sees Redis.
 */
export interface EventQueue {
  /** Resolves once the event is stored (or known as a duplicate); rejects when it is not (the ingress answers 503). */
  enqueue(event: QueuedEvent): Promise<EnqueueResult>;
}
