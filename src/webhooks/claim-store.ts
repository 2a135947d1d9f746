import type { InFlightOutcome } from './dedup-store.js';

/**
 * What the shared store says of a claim: ours now, accepted before, or held by another replica
 * for `remainingMs` more. `displaced`: the id held something that was neither a claim nor an
 * accepted marker with one of the MACs asked for (forged, or written without our secrets, or an
 * in-flight value with more left than any replica's lease), and the claim took its place.
 */
export type SharedClaim =
  | { readonly kind: 'claimed'; readonly displaced: boolean }
  | { readonly kind: 'duplicate' }
  | { readonly kind: 'in_flight'; readonly remainingMs: number };

/** `held`: our claim was still there; `already`: accepted before; `lapsed`: our claim had expired (or was someone else's). */
export type SharedAccept = 'held' | 'already' | 'lapsed';

/**
 * The storage half of shared deduplication (implemented in `src/redis/` by token-guarded
 * scripts): an id is free, in flight under a token with a lease, or accepted for a retention,
 * with a marker MAC. The store compares MACs the policy hands it and decides nothing else: which
 * MACs count, and what an announcement's MAC proves, are {@link SharedDedup}'s.
 *
 * Every method rejects with an error that says whether it may have taken effect
 * (`outcomeUnknown`, see src/lib/store-failure.ts). A scripted stand-in keeps one value per id.
 */
export interface ClaimStore {
  /**
   * Claims `id` for `leaseMs` unless it is accepted with one of `acceptedMacs`, or in flight with at
   * most `longestLeaseMs` left (more than that, no replica's claim: taken over, `displaced`).
   */
  claim(id: string, token: string, leaseMs: number, acceptedMacs: readonly string[], longestLeaseMs: number): Promise<SharedClaim>;
  /**
   * Records the id as accepted with `mac` (whatever it held, unless already accepted with one of
   * `acceptedMacs`) and announces it with the MAC.
   */
  accept(id: string, token: string, retentionMs: number, mac: string, acceptedMacs: readonly string[]): Promise<SharedAccept>;
  /** Frees the id if it still holds `token`, and announces it; false when it did not. */
  release(id: string, token: string): Promise<boolean>;
  /** Records an id accepted while the store was away, with `mac`, for what is left of its retention. */
  backfill(id: string, remainingMs: number, mac: string): Promise<void>;
  /** `listener` hears every settlement announced (the MAC of an accept, null for a release or when none came). */
  onSettled(listener: (id: string, outcome: InFlightOutcome, mac: string | null) => void): Promise<void>;
  /** `hook` runs when the store answers again after it did not. */
  onRestored(hook: () => void): void;
  /** Milliseconds since the store last answered anything. */
  silentForMs(): number;
}
