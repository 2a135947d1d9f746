import type { InFlightOutcome } from './dedup-store.js';

/** What the shared store says of a claim: ours now, accepted before, or held by another replica for `remainingMs` more. */
export type SharedClaim = { readonly kind: 'claimed' } | { readonly kind: 'duplicate' } | { readonly kind: 'in_flight'; readonly remainingMs: number };

/** `held`: our claim was still there; `already`: accepted before; `lapsed`: our claim had expired (or was someone else's). */
export type SharedAccept = 'held' | 'already' | 'lapsed';

/**
 * The storage half of shared deduplication (implemented in `src/redis/` by token-guarded
 * scripts): an id is free, in flight under a token with a lease, or accepted for a retention.
 * Every method rejects with an error that says whether it may have taken effect
 * (`outcomeUnknown`, see src/lib/store-failure.ts). The policy is {@link SharedDedup}'s.
 */
export interface ClaimStore {
  claim(id: string, token: string, leaseMs: number): Promise<SharedClaim>;
  /** Records the id as accepted (whatever it held) and announces it. */
  accept(id: string, token: string, retentionMs: number): Promise<SharedAccept>;
  /** Frees the id if it still holds `token`, and announces it; false when it did not. */
  release(id: string, token: string): Promise<boolean>;
  /** Records ids accepted while the store was away, each for what is left of its retention. */
  backfill(id: string, remainingMs: number): Promise<void>;
  /** `listener` hears every settlement announced by any replica. */
  onSettled(listener: (id: string, outcome: InFlightOutcome) => void): Promise<void>;
  /** `hook` runs when the store answers again after it did not. */
  onRestored(hook: () => void): void;
  /** Milliseconds since the store last answered anything. */
  silentForMs(): number;
}
