import { performance } from 'node:perf_hooks';
import type { RevocationHook } from '../lib/revocation-hook.js';
import type { CacheConfig } from '../config/index.js';
import { allowBodyPrefix } from './answers.js';
import type { Answer, CheckRequest, ServiceDecision } from './types.js';

/** The key is the whole request; a length prefix keeps `("ab","c")` and `("a","bc")` apart. */
export function cacheKey(req: CheckRequest): string {
  return `${req.userReference.length}:${req.userReference}${req.configKey}`;
}

/** Whether `key` is a {@link cacheKey} of `userReference` (without building its prefix). */
function isKeyOf(key: string, userReference: string): boolean {
  const len = String(userReference.length);
  return key.startsWith(len) && key.charCodeAt(len.length) === 58 /* ':' */ && key.startsWith(userReference, len.length + 1);
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

/** The only thing the cache stores: an ALLOW of the service, as the strict parser gave it. */
export type AllowDecision = Extract<ServiceDecision, { kind: 'allow' }>;

/** How many dead entries one {@link AllowCache.sweep} call drops at most by default... */
export const SWEEP_BUDGET = 4096;
/** ...and for how long it may run (ms), checked every 128 entries. */
export const SWEEP_MAX_MS = 2;

const NONE = -1;
const INITIAL_SLOTS = 1024;
/** User-index buckets: the power of two at or above maxEntries, at most 2^20 (4 MiB). */
const MAX_USER_BUCKETS = 1 << 20;

/** 32-bit FNV-1a of a string's UTF-16 units: the user-index bucket. */
function hashOf(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/**
 * Everything the cache holds, in parallel typed arrays indexed by slot ("struct of arrays"): an
 * entry costs its key string, one Map entry (key → slot) and about 60 bytes of numbers, and the
 * garbage collector sees a handful of objects instead of millions. Replaced whole by a purge of
 * everything, which is therefore O(1).
 */
class Store {
  readonly slotOf = new Map<string, number>();
  keys: (string | undefined)[] = [];
  capacity: number;
  wallDeath: Float64Array;
  monoDeath: Float64Array;
  validUntil: Float64Array;
  /** Interned configKey id (see {@link ConfigKeys}). */
  config: Int32Array;
  /** 1 once a refresh-ahead was asked for the entry in this slot (once per entry). */
  refreshAsked: Uint8Array;
  /** Recency list (head = most recently used); `lruNext` doubles as the free list. */
  lruPrev: Int32Array;
  lruNext: Int32Array;
  lruHead = NONE;
  lruTail = NONE;
  freeHead = NONE;
  /** Next never-used slot. */
  fresh = 0;
  /** Per-user chains hanging off hashed buckets: a user purge walks its bucket only. */
  userPrev: Int32Array;
  userNext: Int32Array;
  userBucket: Int32Array;
  /** Bucket → first slot + 1 (0: empty), so a fresh zeroed array is an empty index. */
  readonly userHeads: Int32Array;
  /** Min-heap of slots by monotonic death, and each slot's place in it: sweeps touch the dead only. */
  heap: Int32Array;
  heapPos: Int32Array;
  heapSize = 0;

  constructor(
    readonly maxEntries: number,
    userBuckets: number,
  ) {
    this.capacity = Math.min(INITIAL_SLOTS, maxEntries);
    const n = this.capacity;
    this.wallDeath = new Float64Array(n);
    this.monoDeath = new Float64Array(n);
    this.validUntil = new Float64Array(n);
    this.config = new Int32Array(n);
    this.refreshAsked = new Uint8Array(n);
    this.lruPrev = new Int32Array(n);
    this.lruNext = new Int32Array(n);
    this.userPrev = new Int32Array(n);
    this.userNext = new Int32Array(n);
    this.userBucket = new Int32Array(n);
    this.heap = new Int32Array(n);
    this.heapPos = new Int32Array(n);
    this.userHeads = new Int32Array(userBuckets);
  }

  /** Doubles every per-slot array (a copy, no per-entry work in JS), up to maxEntries. */
  grow(): void {
    const n = Math.min(this.capacity * 2, this.maxEntries);
    const f64 = (a: Float64Array): Float64Array => {
      const b = new Float64Array(n);
      b.set(a);
      return b;
    };
    const i32 = (a: Int32Array): Int32Array => {
      const b = new Int32Array(n);
      b.set(a);
      return b;
    };
    this.wallDeath = f64(this.wallDeath);
    this.monoDeath = f64(this.monoDeath);
    this.validUntil = f64(this.validUntil);
    this.config = i32(this.config);
    const asked = new Uint8Array(n);
    asked.set(this.refreshAsked);
    this.refreshAsked = asked;
    this.lruPrev = i32(this.lruPrev);
    this.lruNext = i32(this.lruNext);
    this.userPrev = i32(this.userPrev);
    this.userNext = i32(this.userNext);
    this.userBucket = i32(this.userBucket);
    this.heap = i32(this.heap);
    this.heapPos = i32(this.heapPos);
    this.capacity = n;
  }
}

/**
 * Interned configKeys with reference counts: each holds the ALLOW body up to `validUntil`, so a
 * hit writes `prefix + validUntil + "}"` and an entry stores a 4-byte id, not a body.
 */
class ConfigKeys {
  private readonly idOf = new Map<string, number>();
  private readonly names: (string | undefined)[] = [];
  readonly prefixes: string[] = [];
  readonly prefixBytes: number[] = [];
  private readonly refs: number[] = [];
  private readonly free: number[] = [];

  acquire(configKey: string): number {
    let id = this.idOf.get(configKey);
    if (id === undefined) {
      id = this.free.pop() ?? this.names.length;
      this.idOf.set(configKey, id);
      this.names[id] = configKey;
      const prefix = allowBodyPrefix(configKey);
      this.prefixes[id] = prefix;
      this.prefixBytes[id] = Buffer.byteLength(prefix);
      this.refs[id] = 0;
    }
    this.refs[id]!++;
    return id;
  }

  release(id: number): void {
    if (--this.refs[id]! > 0) return;
    this.idOf.delete(this.names[id]!);
    this.names[id] = undefined;
    this.prefixes[id] = '';
    this.free.push(id);
  }
}

/**
 * The ALLOW cache. It holds only ALLOWs of the service (`setAllow` takes nothing else), checks
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
  /** Set by the last {@link get} that found its entry inside the refresh-ahead window for the first time. */
  private refreshDue = false;

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

  /** The cached ALLOW answer for `key`, or undefined; a dead entry is deleted, never served. */
  get(key: string): Answer | undefined {
    const s = this.s;
    if (s === null) return undefined;
    this.refreshDue = false;
    const slot = s.slotOf.get(key);
    if (slot === undefined) return undefined;
    const wallLeft = s.wallDeath[slot]! - this.now();
    const monoLeft = s.monoDeath[slot]! - this.monoNow();
    if (wallLeft <= 0 || monoLeft <= 0) {
      this.remove(s, slot);
      return undefined;
    }
    // Refresh-ahead: the first read inside the window says so, once per entry.
    if (this.refreshAheadMs > 0 && s.refreshAsked[slot] === 0 && Math.min(wallLeft, monoLeft) <= this.refreshAheadMs) {
      s.refreshAsked[slot] = 1;
      this.refreshDue = true;
    }
    this.touch(s, slot);
    const id = s.config[slot]!;
    const validUntil = s.validUntil[slot]!;
    const v = String(validUntil);
    return { status: 200, decision: 'allow', source: 'cache', body: `${this.configs.prefixes[id]!}${v}}`, bodyBytes: this.configs.prefixBytes[id]! + v.length + 1, validUntil };
  }

  /**
   * True once after a {@link get} found its entry inside the refresh-ahead window
   * (`--cache-refresh-ahead-ms`) for the first time: that entry is due to be asked again. Reading
   * it clears it.
   */
  takeRefreshDue(): boolean {
    const due = this.refreshDue;
    this.refreshDue = false;
    return due;
  }

  /**
   * Stores an ALLOW until `diesAt`. Ignored when the cache is off, when the entry would be born
   * dead, when a purge happened since `generation` was read, or when `key` is not a
   * {@link cacheKey} of `userReference` (a user purge could not find it).
   */
  setAllow(key: string, userReference: string, allow: AllowDecision, diesAt: number, generation: number): boolean {
    const s = this.s;
    if (s === null || generation !== this.gen || allow.kind !== 'allow') return false;
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
    s.validUntil[slot] = allow.validUntil;
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
    this.siftUp(s, i);
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
      this.siftDown(s, this.siftUp(s, i));
    }
    // free list
    s.lruNext[slot] = s.freeHead;
    s.freeHead = slot;
  }

  private siftUp(s: Store, i: number): number {
    const { heap, heapPos, monoDeath } = s;
    const slot = heap[i]!;
    const d = monoDeath[slot]!;
    while (i > 0) {
      const p = (i - 1) >> 1;
      const ps = heap[p]!;
      if (monoDeath[ps]! <= d) break;
      heap[i] = ps;
      heapPos[ps] = i;
      i = p;
    }
    heap[i] = slot;
    heapPos[slot] = i;
    return i;
  }

  private siftDown(s: Store, i: number): void {
    const { heap, heapPos, monoDeath } = s;
    const n = s.heapSize;
    const slot = heap[i]!;
    const d = monoDeath[slot]!;
    for (;;) {
      let c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && monoDeath[heap[c + 1]!]! < monoDeath[heap[c]!]!) c++;
      const cs = heap[c]!;
      if (monoDeath[cs]! >= d) break;
      heap[i] = cs;
      heapPos[cs] = i;
      i = c;
    }
    heap[i] = slot;
    heapPos[slot] = i;
  }
}
