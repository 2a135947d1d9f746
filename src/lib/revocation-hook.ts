/**
 * The seam through which revocations learned from webhooks reach whatever caches decisions.
 * Today the in-process ALLOW cache implements it; with several replicas a Redis pub/sub fan-out
 * will implement it too, without the webhook code knowing.
 */
export interface RevocationHook {
  /** Forget every cached ALLOW of this customer (`userReference`). Returns how many were dropped. */
  revokeUser(userReference: string): number;
  /** Forget every cached ALLOW (an event that does not say whose consent changed). */
  revokeAll(): number;
}
