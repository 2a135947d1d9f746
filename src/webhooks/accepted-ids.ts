import { fingerprintInto } from './id-fingerprint.js';

/** Slots the ring starts with; it doubles up to its bound as ids come. */
const INITIAL_CAPACITY = 1024;
const EMPTY = 0;
/** A ring slot whose id was taken out before its turn (accepted again): skipped when it comes. */
const GONE = -Infinity;

/**
 * The accepted event ids one replica remembers, as 128-bit fingerprints ({@link fingerprintInto})
 * in typed arrays: a ring in acceptance order, which is also expiry order since every id is kept
 * for the same time, and an open-addressing index over it (linear probing, at most half full,
 * backward-shift deletion).
 *
 * Why not a `Map<string, number>`: at a million ids (the default bound) the Map held a million
 * strings and entries the garbage collector had to mark on every full collection, about 100 MB;
 * these arrays hold no object at all, 32 bytes an id (16 of fingerprint, 8 of expiry, at most 8 of
 * index). On the webhook bench the Map cost 4 µs of CPU per delivery (37.8 against 41.5 µs with no
 * dedup at all).
 */
export class AcceptedIds {
  private capacity = 0;
  /** The ring: fingerprint words (4 a slot) and expiry (epoch ms, GONE when taken out). */
  private fp = new Int32Array(0);
  private expiresAt = new Float64Array(0);
  private head = 0;
  /** Slots in use in the ring, from `head` (GONE ones included). */
  private used = 0;
  /** Ids remembered (GONE slots excluded). */
  private live = 0;
  /** slot + 1 for each fingerprint, at its probe position; EMPTY = 0. */
  private index = new Int32Array(0);
  private mask = 0;
  /** The fingerprint of the id being looked at (one scratch, no allocation per call). */
  private readonly probe = new Int32Array(4);

  constructor(private readonly maxEntries: number) {
    this.resize(Math.min(INITIAL_CAPACITY, maxEntries));
  }

  get size(): number {
    return this.live;
  }

  /** Whether `id` was accepted and is still remembered at `now`. */
  has(id: string, now: number): boolean {
    fingerprintInto(id, this.probe, 0);
    const slot = this.find();
    return slot >= 0 && this.expiresAt[slot]! > now;
  }

  /** Remembers `id` until `expiresAt`; the oldest id goes first when the bound is reached. */
  add(id: string, expiresAt: number, now: number): void {
    this.expire(now);
    fingerprintInto(id, this.probe, 0);
    const again = this.find();
    if (again >= 0) this.takeOut(again);
    if (this.used === this.capacity) {
      if (this.capacity < this.maxEntries) this.resize(Math.min(this.capacity * 2, this.maxEntries));
      else this.dropOldest();
    }
    const slot = (this.head + this.used) % this.capacity;
    this.used++;
    this.live++;
    const p = this.probe;
    const fp = this.fp;
    fp[slot * 4] = p[0]!;
    fp[slot * 4 + 1] = p[1]!;
    fp[slot * 4 + 2] = p[2]!;
    fp[slot * 4 + 3] = p[3]!;
    this.expiresAt[slot] = expiresAt;
    this.insert(slot);
  }

  /** Forgets the ids whose time has come (they are at the front: O(1) amortised). */
  expire(now: number): void {
    while (this.used > 0) {
      const e = this.expiresAt[this.head]!;
      if (e !== GONE && e > now) return;
      this.dropOldest();
    }
  }

  clear(): void {
    this.resize(Math.min(INITIAL_CAPACITY, this.maxEntries), false);
  }

  private dropOldest(): void {
    const slot = this.head;
    if (this.expiresAt[slot] !== GONE) {
      this.unindex(slot);
      this.live--;
    }
    this.head = (slot + 1) % this.capacity;
    this.used--;
  }

  /** An id accepted again before its time (its claim had lapsed): its old slot is skipped. */
  private takeOut(slot: number): void {
    this.unindex(slot);
    this.expiresAt[slot] = GONE;
    this.live--;
  }

  /** The ring slot holding the probe's fingerprint, or -1. */
  private find(): number {
    const p = this.probe;
    const fp = this.fp;
    const index = this.index;
    for (let i = p[0]! & this.mask; ; i = (i + 1) & this.mask) {
      const s = index[i]! - 1;
      if (s < 0) return -1;
      const at = s * 4;
      if (fp[at] === p[0] && fp[at + 1] === p[1] && fp[at + 2] === p[2] && fp[at + 3] === p[3]) return s;
    }
  }

  private insert(slot: number): void {
    const index = this.index;
    let i = this.fp[slot * 4]! & this.mask;
    while (index[i] !== EMPTY) i = (i + 1) & this.mask;
    index[i] = slot + 1;
  }

  /** Removes `slot` from the index, shifting back the entries its removal would cut off. */
  private unindex(slot: number): void {
    const index = this.index;
    const mask = this.mask;
    let i = this.fp[slot * 4]! & mask;
    while (index[i] !== slot + 1) i = (i + 1) & mask;
    let hole = i;
    for (let j = (hole + 1) & mask; index[j] !== EMPTY; j = (j + 1) & mask) {
      const home = this.fp[(index[j]! - 1) * 4]! & mask;
      // The entry at j may move into the hole if its home is not in (hole, j] (cyclically).
      if (((j - home) & mask) >= ((j - hole) & mask)) {
        index[hole] = index[j]!;
        hole = j;
      }
    }
    index[hole] = EMPTY;
  }

  /** A ring of `capacity` slots, the live ids copied over in order (unless `keep` is false). */
  private resize(capacity: number, keep = true): void {
    const fp = new Int32Array(capacity * 4);
    const expiresAt = new Float64Array(capacity);
    let n = 0;
    if (keep) {
      for (let k = 0; k < this.used; k++) {
        const from = (this.head + k) % this.capacity;
        if (this.expiresAt[from] === GONE) continue;
        fp.set(this.fp.subarray(from * 4, from * 4 + 4), n * 4);
        expiresAt[n++] = this.expiresAt[from]!;
      }
    }
    let size = 2;
    while (size < capacity * 2) size *= 2;
    this.capacity = capacity;
    this.fp = fp;
    this.expiresAt = expiresAt;
    this.head = 0;
    this.used = n;
    this.live = n;
    this.index = new Int32Array(size);
    this.mask = size - 1;
    for (let s = 0; s < n; s++) this.insert(s);
  }
}
