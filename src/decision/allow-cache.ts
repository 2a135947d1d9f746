import { performance } from 'node:perf_hooks';
import type { RevocationHook } from '../lib/revocation-hook.js';
import type { CacheConfig } from '../config/index.js';
import { AllowAnswer } from './allow-answer.js';
import { ConfigKeys, hashOf, MAX_USER_BUCKETS, NONE, siftDown, siftUp, Store } from './cache-store.js';
import { AllowedDecision } from './parse-response.js';
import type { CheckRequest } from './types.js';
import { keyMadeWith } from './request.js';

/** The key is the whole request; a length prefix keeps `("ab","c")` and `("a","bc")` apart. */
export function cacheKey(req: CheckRequest): string {
  return keyMadeWith(req) ?? `${req.userReference.length}:${req.userReference}${req.configKey}`;
}

/** Whether `key` is a {@link cacheKey} of `userReference` (without building its prefix). */
function isKeyOf(key: string, userReference: string): boolean {
  const len = String(userReference.length);
  return key.startsWith(len) && key.charCodeAt(len.length) === 58 /* ':' */ && key.startsWith(userReference, len.length + 1);
}

/** A live cached ALLOW, and whether this read is the one that makes it due for a refresh-ahead. */
export interface CacheHit {
  readonly answer: AllowAnswer;
  readonly refreshDue: boolean;
}

/** How many dead entries one {@link AllowCache.sweep} call drops at most by default... */
export const SWEEP_BUDGET = 4096;
/** ...and for how long it may run (ms), checked every 128 entries. */
export const SWEEP_MAX_MS = 2;

/**
 * The ALLOW cache. It holds only ALLOWs of the service: `setAllow` takes an {@link AllowedDecision}
 * (which only the fail-closed parser makes) and nothing else, keeps that very object, and a hit is
 * an {@link AllowAnswer} rendered from it. It checks
 * every entry's death against the injected clocks on every read (a read never extends a life),
 * and drops by customer when a revocation arrives.
 *
 * An entry dies at the earlier of two instants: its wall-clock death (`diesAt`, from `validUntil`)
 * and the life it was granted at write measured on the monotonic clock. A wall clock stepped
 * backwards (NTP, a VM resumed, an operator) therefore never keeps an ALLOW past `validUntil`;
 * one stepped forwards kills entries early, which is safe.
 *
 * Nothing walks every entry: reads expire lazily, {@link sweep} pops at most a budget of dead
 * entries off a heap ordered by death, {@link size} is a count, a user purge walks that user's
 * hash bucket, and a purge of everything swaps in an empty store (O(1); the garbage collector
 * frees the old one off the request path).
 *
 * Revocation races: a call that was in flight when a purge happened could bring back an ALLOW
 * computed before the revocation. Every purge bumps {@link generation}; a write carries the
 * generation seen when its call started and is dropped if a purge came in between.
 */
export class AllowCache implements RevocationHook {
  private s: Store | null;
  private configs = new ConfigKeys();
  private readonly userBuckets: number;
  private gen = 0;
  private readonly refreshAheadMs: number;

  constructor(
    private readonly cfg: CacheConfig,
    private readonly now: () => number = Date.now,
    /** Monotonic milliseconds (`performance.now` by default); only differences are used. */
    private readonly monoNow: () => number = () => performance.now(),
    /** User-index buckets, a power of two (tests pass few to force shared buckets). */
    userBuckets?: number,
  ) {
    let buckets = 1;
    while (buckets < cfg.maxEntries && buckets < MAX_USER_BUCKETS) buckets *= 2;
    if (userBuckets !== undefined) buckets = userBuckets;
    this.userBuckets = buckets;
    this.refreshAheadMs = cfg.refreshAheadMs ?? 0;
    this.s = cfg.maxEntries === 0 ? null : new Store(cfg.maxEntries, buckets);
  }

  get enabled(): boolean {
    return this.s !== null;
  }

  /** Entries held: a count, not a walk (dead ones leave on read, on sweep, or when evicted). */
  get size(): number {
    return this.s?.slotOf.size ?? 0;
  }

  /** Incremented by every purge. */
  get generation(): number {
    return this.gen;
  }

  /**
   * The cached ALLOW answer for `key`, or undefined; a dead entry is deleted, never served.
   * `refreshDue` is true on the first read that finds the entry inside the refresh-ahead window
   * (`--cache-refresh-ahead-ms`): that entry is due to be asked again, once.
   */
  lookup(key: string): CacheHit | undefined {
    const s = this.s;
    if (s === null) return undefined;
    const slot = s.slotOf.get(key);
    if (slot === undefined) return undefined;
    const wallLeft = s.wallDeath[slot]! - this.now();
    const monoLeft = s.monoDeath[slot]! - this.monoNow();
    if (wallLeft <= 0 || monoLeft <= 0) {
      this.remove(s, slot);
      return undefined;
    }
    let refreshDue = false;
    if (this.refreshAheadMs > 0 && s.refreshAsked[slot] === 0 && Math.min(wallLeft, monoLeft) <= this.refreshAheadMs) {
      s.refreshAsked[slot] = 1;
      refreshDue = true;
    }
    this.touch(s, slot);
    return { answer: AllowAnswer.of(s.allowed[slot]!, 'cache', this.configs.prefixes[s.config[slot]!]), refreshDue };
  }

  /**
   * The cache's own string equal to `configKey` while an entry holds one, else `configKey`: an
   * ALLOW parsed for it (the parser keeps the string it is asked with) then shares the cache's copy
   * instead of holding one of its own per entry.
   */
  sharedConfigKey(configKey: string): string {
    return this.configs.shared(configKey);
  }

  /**
   * Stores an ALLOW until `diesAt`. Ignored when the cache is off, when the entry would be born
   * dead, when a purge happened since `generation` was read, or when `key` is not a
   * {@link cacheKey} of `userReference` (a user purge could not find it).
   */
  setAllow(key: string, userReference: string, allow: AllowedDecision, diesAt: number, generation: number): boolean {
    const s = this.s;
    if (s === null || generation !== this.gen || !(allow instanceof AllowedDecision)) return false;
    if (!isKeyOf(key, userReference)) return false;
    const lifeMs = diesAt - this.now();
    if (!(lifeMs > 0)) return false;
    // The configKey is held before the entry it replaces lets go of it: a refresh of the same
    // answer keeps the interned body prefix instead of dropping and rebuilding it.
    const config = this.configs.acquire(allow.configKey);
    const old = s.slotOf.get(key);
    if (old !== undefined) this.remove(s, old);
    const slot = this.allocate(s);
    s.keys[slot] = key;
    s.slotOf.set(key, slot);
    s.wallDeath[slot] = diesAt;
    s.monoDeath[slot] = this.monoNow() + lifeMs;
    s.allowed[slot] = allow;
    s.config[slot] = config;
    s.refreshAsked[slot] = 0;
    // most recently used
    s.lruPrev[slot] = NONE;
    s.lruNext[slot] = s.lruHead;
    if (s.lruHead !== NONE) s.lruPrev[s.lruHead] = slot;
    else s.lruTail = slot;
    s.lruHead = slot;
    // user index
    const b = hashOf(userReference) & (this.userBuckets - 1);
    const head = s.userHeads[b]! - 1;
    s.userBucket[slot] = b;
    s.userPrev[slot] = NONE;
    s.userNext[slot] = head;
    if (head !== NONE) s.userPrev[head] = slot;
    s.userHeads[b] = slot + 1;
    // death heap
    const i = s.heapSize++;
    s.heap[i] = slot;
    s.heapPos[slot] = i;
    siftUp(s, i);
    return true;
  }

  /** Drops one key (a fresh DENY for it makes the cached ALLOW stale). */
  delete(key: string): void {
    const s = this.s;
    const slot = s?.slotOf.get(key);
    if (s && slot !== undefined) this.remove(s, slot);
  }

  /** Purges every entry of one user: O(entries in its hash bucket). */
  revokeUser(userReference: string): number {
    this.gen++;
    const s = this.s;
    if (s === null) return 0;
    const prefix = `${userReference.length}:${userReference}`;
    const b = hashOf(userReference) & (this.userBuckets - 1);
    let n = 0;
    let slot = s.userHeads[b]! - 1;
    while (slot !== NONE) {
      const next = s.userNext[slot]!;
      if (s.keys[slot]!.startsWith(prefix)) {
        this.remove(s, slot);
        n++;
      }
      slot = next;
    }
    return n;
  }

  /** Purges everything in O(1): the store is replaced, not emptied. */
  revokeAll(): number {
    this.gen++;
    const n = this.size;
    if (this.s !== null && n > 0) {
      this.s = new Store(this.cfg.maxEntries, this.userBuckets);
      this.configs = new ConfigKeys();
    }
    return n;
  }

  /**
   * Deletes up to `budget` dead entries (for about `maxMs` at most), soonest death first, so
   * memory and the entries gauge follow the truth without a walk over the live ones; returns how
   * many it deleted.
   */
  sweep(budget = SWEEP_BUDGET, maxMs = SWEEP_MAX_MS): number {
    const s = this.s;
    if (s === null) return 0;
    const now = this.now();
    const mono = this.monoNow();
    const stopAt = performance.now() + maxMs;
    let n = 0;
    while (n < budget && s.heapSize > 0) {
      const top = s.heap[0]!;
      if (s.monoDeath[top]! > mono && s.wallDeath[top]! > now) break;
      this.remove(s, top);
      // Many deaths at once (a clock that jumped): never hold the request thread for long.
      if ((++n & 127) === 0 && performance.now() > stopAt) break;
    }
    return n;
  }

  private allocate(s: Store): number {
    if (s.freeHead !== NONE) {
      const slot = s.freeHead;
      s.freeHead = s.lruNext[slot]!;
      return slot;
    }
    if (s.fresh < s.capacity) return s.fresh++;
    if (s.capacity < s.maxEntries) {
      s.grow();
      return s.fresh++;
    }
    // Full: the soonest death goes if it is already dead, else the least recently used.
    const top = s.heap[0]!;
    const victim = s.monoDeath[top]! <= this.monoNow() || s.wallDeath[top]! <= this.now() ? top : s.lruTail;
    this.remove(s, victim);
    const slot = s.freeHead;
    s.freeHead = s.lruNext[slot]!;
    return slot;
  }

  private touch(s: Store, slot: number): void {
    if (s.lruHead === slot) return;
    const prev = s.lruPrev[slot]!;
    const next = s.lruNext[slot]!;
    s.lruNext[prev] = next; // prev exists: slot is not the head
    if (next !== NONE) s.lruPrev[next] = prev;
    else s.lruTail = prev;
    s.lruPrev[slot] = NONE;
    s.lruNext[slot] = s.lruHead;
    s.lruPrev[s.lruHead] = slot;
    s.lruHead = slot;
  }

  private remove(s: Store, slot: number): void {
    s.slotOf.delete(s.keys[slot]!);
    s.keys[slot] = undefined;
    s.allowed[slot] = undefined;
    this.configs.release(s.config[slot]!);
    // recency list
    const prev = s.lruPrev[slot]!;
    const next = s.lruNext[slot]!;
    if (prev !== NONE) s.lruNext[prev] = next;
    else s.lruHead = next;
    if (next !== NONE) s.lruPrev[next] = prev;
    else s.lruTail = prev;
    // user index
    const uPrev = s.userPrev[slot]!;
    const uNext = s.userNext[slot]!;
    if (uPrev !== NONE) s.userNext[uPrev] = uNext;
    else s.userHeads[s.userBucket[slot]!] = uNext + 1;
    if (uNext !== NONE) s.userPrev[uNext] = uPrev;
    // death heap: move the last element into the hole
    const i = s.heapPos[slot]!;
    const last = s.heap[--s.heapSize]!;
    if (last !== slot) {
      s.heap[i] = last;
      s.heapPos[last] = i;
      siftDown(s, siftUp(s, i));
    }
    // free list
    s.lruNext[slot] = s.freeHead;
    s.freeHead = slot;
  }
}
