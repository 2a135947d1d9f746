/** A revocation learned from a verified event: one customer's consent, or anybody's. */
export type Revocation = { readonly scope: 'user'; readonly userReference: string } | { readonly scope: 'all' };

/**
 * The seam through which revocations learned from webhooks reach whatever caches decisions.
 * The in-process ALLOW cache implements it; with several replicas the Redis invalidation bus
 * wraps it and adds {@link share}, without the webhook code knowing.
 */
export interface RevocationHook {
  /** Forget every cached ALLOW of this customer (`userReference`). Returns how many were dropped. */
  revokeUser(userReference: string): number;
  /** Forget every cached ALLOW (an event that does not say whose consent changed). */
  revokeAll(): number;
  /**
   * Tells the other replicas (present only with several replicas). Resolves once the revocation
   * is on its way to all of them; rejects when it could not be sent, so the event must come again.
   */
  share?(revocation: Revocation): Promise<void>;
}
