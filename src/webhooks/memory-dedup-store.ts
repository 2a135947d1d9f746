import { randomUUID } from 'node:crypto';
import { AcceptedIds } from './accepted-ids.js';
import type { ClaimResult, DedupStore, InFlightOutcome } from './dedup-store.js';

const DUPLICATE: Promise<ClaimResult> = Promise.resolve(Object.freeze({ kind: 'duplicate' as const }));

export interface MemoryDedupStoreOptions {
  /** How long an accepted id is remembered (ms). Default in config: 24 h. */
  readonly retentionMs: number;
  /** Accepted ids remembered at most; the oldest are forgotten first. */
  readonly maxEntries: number;
  /** Clock (epoch ms); injectable for tests. */
  readonly now?: () => number;
}

/**
 * A claim in flight. Its outcome is a promise only once a second copy asks for it (most claims are
 * never waited on: no promise, no closure per delivery).
 */
interface Claim {
  readonly token: string;
  outcome: Promise<InFlightOutcome> | undefined;
  settle: ((outcome: InFlightOutcome) => void) | undefined;
}

/** Settles a claim's waiters, if any came. */
function settle(claim: Claim, outcome: InFlightOutcome): void {
  claim.settle?.(outcome);
}

/**
 * {@link DedupStore} for one replica. Accepted ids are remembered as fingerprints in acceptance
 * order ({@link AcceptedIds}); since every id gets the same retention, the oldest is always at the
 * front, so both expiry and the size bound only ever trim the front (O(1) amortised, no timers).
 */
export class MemoryDedupStore implements DedupStore {
  private readonly accepted: AcceptedIds;
  private readonly inFlight = new Map<string, Claim>();
  private readonly retentionMs: number;
  private readonly now: () => number;
  /**
   * Claim tokens: this store's random id and a count, unique across processes too (SharedDedup
   * uses them as the Redis claim's token, so two replicas must never make the same one), with no
   * UUID per claim.
   */
  private readonly tokenPrefix = `${randomUUID()}.`;
  private tokens = 0;

  constructor(options: MemoryDedupStoreOptions) {
    if (!(options.retentionMs > 0) || !Number.isSafeInteger(options.maxEntries) || options.maxEntries < 1) {
      throw new RangeError('MemoryDedupStore: retentionMs must be > 0 and maxEntries a positive integer');
    }
    this.retentionMs = options.retentionMs;
    this.accepted = new AcceptedIds(options.maxEntries);
    this.now = options.now ?? ((): number => Date.now());
  }

  /** Accepted ids currently remembered. */
  get size(): number {
    this.accepted.expire(this.now());
    return this.accepted.size;
  }

  claim(id: string): Promise<ClaimResult> {
    if (this.accepted.has(id, this.now())) return DUPLICATE;
    const held = this.inFlight.get(id);
    if (held) {
      held.outcome ??= new Promise<InFlightOutcome>((resolve) => (held.settle = resolve));
      return Promise.resolve({ kind: 'in_flight', outcome: held.outcome });
    }
    const token = `${this.tokenPrefix}${++this.tokens}`;
    this.inFlight.set(id, { token, outcome: undefined, settle: undefined });
    return Promise.resolve({ kind: 'claimed', token });
  }

  markAccepted(id: string, token: string): Promise<void> {
    const held = this.take(id, token);
    if (held) {
      const now = this.now();
      this.accepted.add(id, now + this.retentionMs, now);
      settle(held, 'accepted');
    }
    return Promise.resolve();
  }

  release(id: string, token: string): Promise<void> {
    const held = this.take(id, token);
    if (held) settle(held, 'released');
    return Promise.resolve();
  }

  close(): Promise<void> {
    for (const claim of this.inFlight.values()) settle(claim, 'released');
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
}
