import type { Logger } from '../observability/index.js';
import type { ClaimStore } from './claim-store.js';

/** Ids accepted while the store was away, kept to be written once it is back (oldest dropped beyond). */
const MAX_UNSHARED = 100_000;
/**
 * How soon what could not be written is tried again (ms). A restore writes it too, but one failed
 * call while the health check keeps passing is no restore.
 */
const RETRY_MS = 1000;

/**
 * What shared dedup owes the store and could not give it when it was away: accepts this replica
 * decided alone (written back for what is left of their retention, so later copies are
 * duplicates everywhere) and claims whose outcome was unknown (released, so the service's retry is
 * not held for a lease). Written on a restore and each second until it is empty.
 */
export class DedupBacklog {
  /** Accepted while the store did not answer: id → end of retention (epoch ms). */
  private readonly unshared = new Map<string, number>();
  /** Claims whose outcome was unknown: id → token. */
  private readonly unreleased = new Map<string, string>();
  private flushing = false;
  private retryTimer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(
    private readonly o: {
      readonly store: ClaimStore;
      /** The marker MAC an accept of `id` is written with. */
      readonly marker: (id: string) => string;
      readonly logger: Logger;
      /** Epoch ms. */
      readonly now: () => number;
    },
  ) {}

  accepted(id: string, until: number): void {
    this.unshared.delete(id);
    this.unshared.set(id, until);
    if (this.unshared.size > MAX_UNSHARED) this.unshared.delete(this.unshared.keys().next().value!);
    this.retrySoon();
  }

  unknownClaim(id: string, token: string): void {
    this.unreleased.set(id, token);
    this.retrySoon();
  }

  /** Writes what was accepted without the store, and releases claims whose outcome was unknown. */
  async flush(): Promise<void> {
    if (this.flushing || this.closed) return;
    this.flushing = true;
    let written = 0;
    try {
      for (const [id, token] of [...this.unreleased]) {
        await this.o.store.release(id, token);
        this.unreleased.delete(id);
      }
      for (const [id, until] of [...this.unshared]) {
        const remainingMs = until - this.o.now();
        if (remainingMs > 0) {
          await this.o.store.backfill(id, remainingMs, this.o.marker(id));
          written++;
        }
        this.unshared.delete(id);
      }
    } catch {
      // The store went away again: the rest waits for the next try.
    } finally {
      this.flushing = false;
      if (written > 0) this.o.logger.info({ event: 'webhook_dedup_backfilled', events: written }, 'events accepted while Redis was unreachable recorded in Redis');
      if (this.unshared.size > 0 || this.unreleased.size > 0) this.retrySoon();
    }
  }

  close(): void {
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
  }

  private retrySoon(): void {
    if (this.retryTimer || this.closed) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      void this.flush();
    }, RETRY_MS);
    this.retryTimer.unref();
  }
}
