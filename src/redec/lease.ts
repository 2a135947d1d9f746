/** What the replica that ran last left for the others to report. */
export interface RunSummary {
  readonly pending: number;
  /** First-seen time (epoch ms) of the oldest pending obligation, or null when none. */
  readonly oldestFirstSeenAt: number | null;
}

/**
 * One replica at a time. Without Redis every replica holds its own lease ({@link LocalLease}); with
 * Redis, `redec:lease` (see `src/redis/redec-lease.ts`).
 */
export interface ReconcileLease {
  /** True when this replica may run now; false when another runs, or ran within the interval. */
  acquire(): Promise<boolean>;
  /**
   * Extends the lease during a long run; false when it was lost (the run must stop). Called after
   * every page and every handed obligation: an implementation talks to Redis only when a good part
   * of the lease has passed.
   */
  renew(): Promise<boolean>;
  /**
   * Ends the run: after a complete run the lease is kept (as done) for the interval so no replica
   * runs again before it, and `summary` is left for the others; after a failed run it is released
   * so the next replica's tick starts over.
   */
  finish(summary: RunSummary | null): Promise<void>;
  /** The summary of the last complete run by any replica, or null. */
  lastSummary(): Promise<RunSummary | null>;
}

/** The lease of a replica without Redis: always its own. */
export class LocalLease implements ReconcileLease {
  acquire(): Promise<boolean> {
    return Promise.resolve(true);
  }
  renew(): Promise<boolean> {
    return Promise.resolve(true);
  }
  finish(): Promise<void> {
    return Promise.resolve();
  }
  lastSummary(): Promise<RunSummary | null> {
    return Promise.resolve(null);
  }
}
