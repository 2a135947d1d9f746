/** How a waiting copy's wait ended: the first copy was accepted, or it failed and let go. */
export type InFlightOutcome = 'accepted' | 'released';

/**
 * The answer to {@link DedupStore.claim}:
 * - `claimed`: this caller holds the event and must end with `markAccepted` or `release`, passing
 *   `token` (so a holder whose lease lapsed cannot settle someone else's claim);
 * - `duplicate`: the event was accepted already;
 * - `in_flight`: another copy holds it; `outcome` settles when that copy does.
 */
export type ClaimResult =
  | { readonly kind: 'claimed'; readonly token: string }
  | { readonly kind: 'duplicate' }
  | { readonly kind: 'in_flight'; readonly outcome: Promise<InFlightOutcome> };

/**
 * Remembers which envelope ids were accepted, and which are being forwarded right now, so an event
 * reaches the app at most once at a time and never again once accepted.
 *
 * Async and lease-shaped so a shared implementation fits behind it: with Redis, `claim` is
 * `SET evt:<id> inflight:<token> NX PX <lease>` (lease ≥ forward timeout, so a crashed replica's
 * claim lapses), `markAccepted` turns the key into `accepted` with the retention TTL when the token
 * still matches, `release` deletes it under the same condition, and `in_flight` waiters poll the key
 * or listen on a channel.
 */
export interface DedupStore {
  claim(id: string): Promise<ClaimResult>;
  /** The app accepted the event: copies from now on are duplicates, for the retention period. */
  markAccepted(id: string, token: string): Promise<void>;
  /** Forwarding failed: forget the claim so the service's retry can try again. */
  release(id: string, token: string): Promise<void>;
  /** Wakes every waiter (`released`) and drops state. */
  close(): Promise<void>;
}
