import type { ClaimStore, SharedAccept, SharedClaim } from '../../../src/webhooks/index.js';
import type { InFlightOutcome } from '../../../src/webhooks/dedup-store.js';
import type { Link, Wire } from './wire.js';

const SETTLED = 'dedup-settled';
/** As DEDUP_WAITING_SLACK_MS of the Redis store: a waiting mark outlives the holder's lease by this much (ms). */
const WAITING_SLACK_MS = 1000;

interface Value {
  /** `inflight:<token>`, `accepted:<mac>`, or whatever a writer put there. */
  readonly value: string;
  /** Epoch ms; the key is gone from then on. */
  readonly expiresAt: number;
}

/**
 * A scripted stand-in of {@link ClaimStore}: the semantics of the Redis scripts
 * (src/redis/dedup-scripts.ts) on one map, one value per id with its expiry on the injected clock,
 * behind the fault script of {@link Wire} (each replica's calls go through its own link).
 *
 * - claim: a value equal to one of the accepted markers asked for is a duplicate; a live
 *   `inflight:` value with at most the longest lease left is in flight for what is left of it,
 *   and a replica is recorded as waiting until then (and {@link WAITING_SLACK_MS} more);
 *   anything else (nothing, a forged value, a claim with more left) is replaced by
 *   `inflight:<token>` for the lease (`displaced` when something was there);
 * - accept: recorded as `accepted:<mac>` for the retention whatever the id held (unless already
 *   accepted with a counted MAC), announced with the MAC only when a replica waits; `held` when
 *   our claim was still there;
 * - release: frees the id only if it still holds our token, and announces it only when a replica waits;
 * - backfill: `accepted:<mac>` for what is left of the retention.
 */
export class StandInClaimStore {
  private readonly values = new Map<string, Value>();
  /** Ids a replica waits for, until when (epoch ms). */
  private readonly waiting = new Map<string, number>();
  /** Tokens that held a claim in the store at some point. */
  private readonly claimed = new Set<string>();
  /** Ids accepted after the claim of the accepting token had lapsed (or been taken): the lease was too short for it. */
  readonly lapses = new Set<string>();

  constructor(private readonly wire: Wire) {}

  /** The store as one replica sees it, through `link`. */
  connect(link: Link): ClaimStore {
    const op = <T>(name: string, effect: () => T): Promise<T> => link.call(name, effect);
    return {
      claim: (id, token, leaseMs, acceptedMacs, longestLeaseMs) => op('claim', () => this.claim(id, token, leaseMs, acceptedMacs, longestLeaseMs)),
      accept: (id, token, retentionMs, mac, acceptedMacs) => op('accept', () => this.accept(id, token, retentionMs, mac, acceptedMacs)),
      release: (id, token) => op('release', () => this.release(id, token)),
      backfill: (id, remainingMs, mac) => op('backfill', () => void this.set(id, `accepted:${mac}`, Math.max(1, Math.round(remainingMs)))),
      onSettled: (listener) =>
        link.subscribe(SETTLED, (m: { id: string; outcome: InFlightOutcome; mac: string | null }) => listener(m.id, m.outcome, m.mac)),
      onRestored: (hook) => link.onRestored(hook),
      silentForMs: () => link.silentForMs(),
    };
  }

  /** What the id holds now (`inflight:…`, `accepted:…`), or undefined. */
  valueOf(id: string): string | undefined {
    return this.get(id)?.value;
  }

  /** A writer without the secrets puts `value` there (for `ttlMs`, or for ever). */
  write(id: string, value: string, ttlMs = Infinity): void {
    this.set(id, value, ttlMs);
  }

  private claim(id: string, token: string, leaseMs: number, acceptedMacs: readonly string[], longestLeaseMs: number): SharedClaim {
    const v = this.get(id);
    if (v) {
      if (acceptedMacs.some((m) => v.value === `accepted:${m}`)) return { kind: 'duplicate' };
      const remainingMs = v.expiresAt - Date.now();
      if (v.value.startsWith('inflight:') && Number.isFinite(v.expiresAt) && remainingMs <= longestLeaseMs) {
        this.waiting.set(id, v.expiresAt + WAITING_SLACK_MS);
        return { kind: 'in_flight', remainingMs };
      }
    }
    this.set(id, `inflight:${token}`, leaseMs);
    this.claimed.add(token);
    return { kind: 'claimed', displaced: v !== undefined };
  }

  private accept(id: string, token: string, retentionMs: number, mac: string, acceptedMacs: readonly string[]): SharedAccept {
    const v = this.get(id);
    if (v && acceptedMacs.some((m) => v.value === `accepted:${m}`)) return 'already';
    this.set(id, `accepted:${mac}`, retentionMs);
    this.announce(id, { id, outcome: 'accepted', mac });
    if (v?.value === `inflight:${token}`) return 'held';
    if (this.claimed.has(token)) this.lapses.add(id);
    return 'lapsed';
  }

  private release(id: string, token: string): boolean {
    if (this.get(id)?.value !== `inflight:${token}`) return false;
    this.values.delete(id);
    this.announce(id, { id, outcome: 'released', mac: null });
    return true;
  }

  /** Publishes a settlement only when a replica waits for it. */
  private announce(id: string, message: { id: string; outcome: InFlightOutcome; mac: string | null }): void {
    const until = this.waiting.get(id);
    this.waiting.delete(id);
    if (until === undefined || Date.now() >= until) return;
    this.wire.publish(SETTLED, message);
  }

  private get(id: string): Value | undefined {
    const v = this.values.get(id);
    if (v && Date.now() >= v.expiresAt) {
      this.values.delete(id);
      return undefined;
    }
    return v;
  }

  private set(id: string, value: string, ttlMs: number): void {
    this.values.set(id, { value, expiresAt: Date.now() + ttlMs });
  }
}
