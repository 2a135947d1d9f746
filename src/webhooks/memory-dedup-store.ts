import { randomUUID } from 'node:crypto';
import type { ClaimResult, DedupStore, InFlightOutcome } from './dedup-store.js';

export interface MemoryDedupStoreOptions {
  /** How long an accepted id is remembered (ms). Default in config: 24 h. */
  readonly retentionMs: number;
  /** Accepted ids remembered at most; the oldest are forgotten first. */
  readonly maxEntries: number;
  /** Clock (epoch ms); injectable for tests. */
  readonly now?: () => number;
}

interface Claim {
  readonly token: string;
  readonly outcome: Promise<InFlightOutcome>;
  readonly settle: (outcome: InFlightOutcome) => void;
}

/**
 * {@link DedupStore} for one replica. Accepted ids live in a Map kept in insertion order; since every
 * entry gets the same retention, the front of the Map is always the oldest, so both expiry and the
 * size bound only ever trim the front (O(1) amortised, no timers).
 */
export class MemoryDedupStore implements DedupStore {
  private readonly accepted = new Map<string, number>();
  private readonly inFlight = new Map<string, Claim>();
  private readonly retentionMs: number;
  private readonly maxEntries: number;
  private readonly now: () => number;

  constructor(options: MemoryDedupStoreOptions) {
    if (!(options.retentionMs > 0) || !Number.isSafeInteger(options.maxEntries) || options.maxEntries < 1) {
      throw new RangeError('MemoryDedupStore: retentionMs must be > 0 and maxEntries a positive integer');
    }
    this.retentionMs = options.retentionMs;
    this.maxEntries = options.maxEntries;
    this.now = options.now ?? ((): number => Date.now());
  }

  /** Accepted ids currently remembered. */
  get size(): number {
    this.expire();
    return this.accepted.size;
  }

  claim(id: string): Promise<ClaimResult> {
    this.expire();
    if (this.accepted.has(id)) return Promise.resolve({ kind: 'duplicate' });
    const held = this.inFlight.get(id);
    if (held) return Promise.resolve({ kind: 'in_flight', outcome: held.outcome });

    let settle!: (outcome: InFlightOutcome) => void;
    const outcome = new Promise<InFlightOutcome>((resolve) => (settle = resolve));
    const token = randomUUID();
    this.inFlight.set(id, { token, outcome, settle });
    return Promise.resolve({ kind: 'claimed', token });
  }

  markAccepted(id: string, token: string): Promise<void> {
    const held = this.take(id, token);
    if (held) {
      this.accepted.delete(id);
      this.accepted.set(id, this.now() + this.retentionMs);
      while (this.accepted.size > this.maxEntries) this.dropOldest();
      held.settle('accepted');
    }
    return Promise.resolve();
  }

  release(id: string, token: string): Promise<void> {
    this.take(id, token)?.settle('released');
    return Promise.resolve();
  }

  close(): Promise<void> {
    for (const claim of this.inFlight.values()) claim.settle('released');
    this.inFlight.clear();
    this.accepted.clear();
    return Promise.resolve();
  }

  private take(id: string, token: string): Claim | undefined {
    const held = this.inFlight.get(id);
    if (!held || held.token !== token) return undefined;
    this.inFlight.delete(id);
    return held;
  }

  private expire(): void {
    const now = this.now();
    for (const [id, expiresAt] of this.accepted) {
      if (expiresAt > now) break;
      this.accepted.delete(id);
    }
  }

  private dropOldest(): void {
    const oldest = this.accepted.keys().next();
    if (!oldest.done) this.accepted.delete(oldest.value);
  }
}
