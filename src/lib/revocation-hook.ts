/** A revocation learned from a verified event: one customer's consent, or anybody's. */
export type Revocation = { readonly scope: 'user'; readonly userReference: string } | { readonly scope: 'all' };

/**
 * What caches decisions in this process: the seam through which a revocation purges it. The
 * in-process ALLOW cache implements it.
 */
export interface RevocationHook {
  /** Forget every cached ALLOW of this customer (`userReference`). Returns how many were dropped. */
  revokeUser(userReference: string): number;
  /** Forget every cached ALLOW (an event that does not say whose consent changed). */
  revokeAll(): number;
}

/**
 * The fan-out: how a revocation learned by one replica reaches every replica (contract, Several
 * replicas). One replica alone purges its own cache; a fleet also writes it where the others read.
 */
export interface RevocationPublisher {
  /**
   * Purges this replica's cache before it returns (synchronously), then tells the other replicas.
   * The promise resolves once every replica will learn it, and rejects when they cannot (the
   * event that carried it must come again).
   */
  publish(revocation: Revocation): Promise<void>;
}

/** Purges one revocation from `hook`; the number of entries dropped. */
export function applyTo(hook: RevocationHook, revocation: Revocation): number {
  return revocation.scope === 'user' ? hook.revokeUser(revocation.userReference) : hook.revokeAll();
}

/** The publisher of a replica that shares nothing: its own cache is all there is. */
export function localPublisher(hook: RevocationHook): RevocationPublisher {
  return {
    publish(revocation) {
      applyTo(hook, revocation);
      return Promise.resolve();
    },
  };
}
