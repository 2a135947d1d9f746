import { performance } from 'node:perf_hooks';
import { LRUCache } from 'lru-cache';
import type { RevocationHook } from '../lib/revocation-hook.js';
import type { CacheConfig } from '../config/index.js';
import type { Answer, CheckRequest } from './types.js';

interface Entry {
  readonly userReference: string;
  /** Epoch ms after which the entry must never be served. Fixed at write, never extended. */
  readonly diesAt: number;
  /**
   * The same death on the monotonic clock: the life granted at write (`diesAt − now`), counted
   * from the write. A wall clock stepped backwards cannot stretch it.
   */
  readonly diesAtMono: number;
  readonly answer: Answer;
}

/** The key is the whole request; a length prefix keeps `("ab","c")` and `("a","bc")` apart. */
export function cacheKey(req: CheckRequest): string {
  return `${req.userReference.length}:${req.userReference}${req.configKey}`;
}

/**
 * How far ahead of what its `Date` header says the service's clock may be (ms): the header has
 * one-second resolution and is truncated, so `12:00:00` was sent at some instant of that second.
 */
export const DATE_RESOLUTION_SLACK_MS = 999;

/**
 * When a cached ALLOW must die: `validUntil` minus the safety margin, earlier by the skew when
 * the service's `Date` shows the local clock behind, and never later than `now + maxTtlMs`. The
 * `Date` is read against us (as the latest instant of its second), so a zero safety margin still
 * never outlives `validUntil` on the service's clock.
 */
export function deathOf(
  validUntil: number,
  nowMs: number,
  serviceNowMs: number | undefined,
  cfg: Pick<CacheConfig, 'safetyMarginMs' | 'maxTtlMs'>,
): number {
  const behindMs = serviceNowMs === undefined ? 0 : Math.max(0, serviceNowMs + DATE_RESOLUTION_SLACK_MS - nowMs);
  return Math.min(validUntil - behindMs - cfg.safetyMarginMs, nowMs + cfg.maxTtlMs);
}

/**
 * The ALLOW cache. It holds only ALLOW answers (the type of `set` takes nothing else from the
 * service layer), checks every entry's death against the injected clocks on every read (lru-cache's
 * own TTL is not used: its clock is not ours and `updateAgeOnGet` could extend a life), and drops
 * by customer when a revocation arrives.
 *
 * An entry dies at the earlier of two instants: its wall-clock death (`diesAt`, from `validUntil`)
 * and the life it was granted at write measured on the monotonic clock. A wall clock stepped
 * backwards (NTP, a VM resumed, an operator) therefore never keeps an ALLOW past `validUntil`;
 * one stepped forwards kills entries early, which is safe.
 *
 * Revocation races: a call that was in flight when a purge happened could bring back an ALLOW
 * computed before the revocation. Every purge bumps {@link generation}; a write carries the
 * generation seen when its call started and is dropped if a purge came in between.
 */
export class AllowCache implements RevocationHook {
  private readonly lru: LRUCache<string, Entry> | null;
  private readonly byUser = new Map<string, Set<string>>();
  private gen = 0;

  constructor(
    private readonly cfg: CacheConfig,
    private readonly now: () => number = Date.now,
    /** Monotonic milliseconds (`performance.now` by default); only differences are used. */
    private readonly monoNow: () => number = () => performance.now(),
  ) {
    this.lru =
      cfg.maxEntries === 0
        ? null
        : new LRUCache<string, Entry>({
            max: cfg.maxEntries,
            updateAgeOnGet: false,
            allowStale: false,
            dispose: (entry, key, reason) => {
              if (reason !== 'set') this.unindex(entry.userReference, key);
            },
          });
  }

  get enabled(): boolean {
    return this.lru !== null;
  }

  get size(): number {
    return this.lru?.size ?? 0;
  }

  /** Incremented by every purge. */
  get generation(): number {
    return this.gen;
  }

  /** The cached ALLOW answer for `key`, or undefined; a dead entry is deleted, never served. */
  get(key: string): Answer | undefined {
    const entry = this.lru?.get(key);
    if (entry === undefined) return undefined;
    if (entry.diesAt <= this.now() || entry.diesAtMono <= this.monoNow()) {
      this.lru!.delete(key);
      return undefined;
    }
    return entry.answer;
  }

  /**
   * Stores an ALLOW answer until `diesAt`. Ignored when the cache is off, when the entry would be
   * born dead, or when a purge happened since `generation` was read.
   */
  setAllow(key: string, userReference: string, answer: Answer & { decision: 'allow' }, diesAt: number, generation: number): boolean {
    if (!this.lru || generation !== this.gen) return false;
    const lifeMs = diesAt - this.now();
    if (lifeMs <= 0) return false;
    this.lru.set(key, { userReference, diesAt, diesAtMono: this.monoNow() + lifeMs, answer });
    let keys = this.byUser.get(userReference);
    if (!keys) this.byUser.set(userReference, (keys = new Set()));
    keys.add(key);
    return true;
  }

  /** Drops one key (a fresh DENY for it makes the cached ALLOW stale). */
  delete(key: string): void {
    this.lru?.delete(key);
  }

  revokeUser(userReference: string): number {
    this.gen++;
    const keys = this.byUser.get(userReference);
    if (!keys || !this.lru) return 0;
    let n = 0;
    for (const key of [...keys]) if (this.lru.delete(key)) n++;
    this.byUser.delete(userReference);
    return n;
  }

  revokeAll(): number {
    this.gen++;
    const n = this.size;
    this.lru?.clear();
    this.byUser.clear();
    return n;
  }

  /** Deletes dead entries so memory and the entries gauge follow the truth; returns how many. */
  sweep(): number {
    if (!this.lru) return 0;
    const now = this.now();
    const mono = this.monoNow();
    const dead: string[] = [];
    for (const [key, entry] of this.lru.entries()) if (entry.diesAt <= now || entry.diesAtMono <= mono) dead.push(key);
    for (const key of dead) this.lru.delete(key);
    return dead.length;
  }

  private unindex(userReference: string, key: string): void {
    const keys = this.byUser.get(userReference);
    if (!keys) return;
    keys.delete(key);
    if (keys.size === 0) this.byUser.delete(userReference);
  }
}
