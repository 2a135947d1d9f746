import { AllowBodyPrefix } from './allow-answer.js';
import type { AllowedDecision } from './parse-response.js';

/*
 * The ALLOW cache's storage (see allow-cache.ts for the policy): parallel typed arrays per slot,
 * the interned configKeys, and the death heap's two sift operations.
 */

export const NONE = -1;
const INITIAL_SLOTS = 1024;
/** User-index buckets: the power of two at or above maxEntries, at most 2^20 (4 MiB). */
export const MAX_USER_BUCKETS = 1 << 20;

/** 32-bit FNV-1a of a string's UTF-16 units: the user-index bucket. */
export function hashOf(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/**
 * Everything the cache holds, in parallel arrays indexed by slot ("struct of arrays"): an entry
 * costs its key string, one Map entry (key → slot), the parser's {@link AllowedDecision} it serves
 * (an object and its `validUntil` text) and about 50 bytes of numbers in typed arrays that the
 * garbage collector never walks. Replaced whole by a purge of everything, which is therefore O(1).
 */
export class Store {
  readonly slotOf = new Map<string, number>();
  keys: (string | undefined)[] = [];
  capacity: number;
  /** The ALLOW each slot serves, exactly as the parser made it (its configKey and validUntil). */
  allowed: (AllowedDecision | undefined)[] = [];
  wallDeath: Float64Array;
  monoDeath: Float64Array;
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
export class ConfigKeys {
  private readonly idOf = new Map<string, number>();
  private readonly names: (string | undefined)[] = [];
  readonly prefixes: (AllowBodyPrefix | undefined)[] = [];
  private readonly refs: number[] = [];
  private readonly free: number[] = [];

  acquire(configKey: string): number {
    let id = this.idOf.get(configKey);
    if (id === undefined) {
      id = this.free.pop() ?? this.names.length;
      this.idOf.set(configKey, id);
      this.names[id] = configKey;
      this.prefixes[id] = AllowBodyPrefix.of(configKey);
      this.refs[id] = 0;
    }
    this.refs[id]!++;
    return id;
  }

  release(id: number): void {
    if (--this.refs[id]! > 0) return;
    this.idOf.delete(this.names[id]!);
    this.names[id] = undefined;
    this.prefixes[id] = undefined;
    this.free.push(id);
  }

  /** The interned string equal to `configKey` while an entry holds it, else `configKey` itself. */
  shared(configKey: string): string {
    const id = this.idOf.get(configKey);
    return id === undefined ? configKey : this.names[id]!;
  }
}

/** Restores the death heap upward from position `i`; returns where the slot landed. */
export function siftUp(s: Store, i: number): number {
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

/** Restores the death heap downward from position `i`. */
export function siftDown(s: Store, i: number): void {
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
