/** What the reconciler remembers of one pending obligation. */
export interface LedgerEntry {
  /** When a replica first saw it pending (epoch ms). */
  readonly firstSeenAt: number;
  /** When it was last handed to the app (epoch ms), or null. */
  readonly handedAt: number | null;
}

/**
 * The reconciler's memory: first-seen and handed times by identity. In memory for one replica, in
 * Redis (`redec:*`) when replicas share it, so a restart does not reset the clock.
 */
export interface ObligationLedger {
  /**
   * Called after a complete listing: records `now` as the first-seen time of identities not known
   * yet, forgets identities that left the listing, and answers each listed identity's entry.
   */
  sync(identities: readonly string[], now: number): Promise<Map<string, LedgerEntry>>;
  /** Records that these were handed to the app at `at`. */
  markHanded(identities: readonly string[], at: number): Promise<void>;
}

/** The ledger of a replica without Redis. */
export class MemoryLedger implements ObligationLedger {
  private entries = new Map<string, LedgerEntry>();

  sync(identities: readonly string[], now: number): Promise<Map<string, LedgerEntry>> {
    const next = new Map<string, LedgerEntry>();
    for (const id of identities) next.set(id, this.entries.get(id) ?? { firstSeenAt: now, handedAt: null });
    this.entries = next;
    return Promise.resolve(new Map(next));
  }

  markHanded(identities: readonly string[], at: number): Promise<void> {
    for (const id of identities) {
      const e = this.entries.get(id);
      if (e) this.entries.set(id, { ...e, handedAt: at });
    }
    return Promise.resolve();
  }
}
