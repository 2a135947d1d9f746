/** One delivery holding unverified bytes: how many, whose, and how to cut it. */
export interface BudgetHolder {
  /** Bytes it holds now (kept by the budget). */
  held: number;
  /** The sender's address; undefined when unknown (all such holders are one peer). */
  readonly peer: string | undefined;
  /** Ends its read as over budget: its bytes are given back, its sender answered 503 and cut. */
  evict(): void;
}

/**
 * The bytes the ingress may hold, across all connections, for bodies whose signature is not
 * verified yet (`--webhook-max-unverified-bytes`). Bytes are taken as they arrive, never as a
 * `Content-Length` declares them, so an idle connection holds nothing.
 *
 * Fair under pressure: when a chunk does not fit (in all, or within its peer's share), the
 * largest holder is cut if it holds more than the taker would, so a small genuine delivery takes
 * the place of a large partial one; otherwise the taker is refused (503, the service retries). A
 * peer (one sender address) holds at most `peerShareBytes`; behind an ingress every connection may
 * come from one address, which is why the largest-first rule, the per-delivery bound
 * (`--webhook-max-body-bytes`) and the minimum data rate hold on their own.
 *
 * @example
 * const budget = new UnverifiedBudget(16 * 1024 * 1024, 4 * 1024 * 1024, (n) => gauge.set(n));
 * if (!budget.take(holder, chunk.length)) refuse(); // …later: budget.release(holder)
 */
export class UnverifiedBudget {
  private usedBytes = 0;
  private readonly holders = new Set<BudgetHolder>();
  private readonly byPeer = new Map<string | undefined, number>();

  constructor(
    /** Bytes (> 0). */
    readonly limitBytes: number,
    /** Bytes one peer may hold at most (> 0, at most the limit). */
    readonly peerShareBytes: number = limitBytes,
    private readonly onChange: (usedBytes: number) => void = () => undefined,
  ) {
    if (!Number.isSafeInteger(limitBytes) || limitBytes <= 0) throw new RangeError(`UnverifiedBudget: limitBytes must be a positive integer, got ${limitBytes}`);
    if (!Number.isSafeInteger(peerShareBytes) || peerShareBytes <= 0 || peerShareBytes > limitBytes) {
      throw new RangeError(`UnverifiedBudget: peerShareBytes must be a positive integer up to limitBytes, got ${peerShareBytes}`);
    }
  }

  get used(): number {
    return this.usedBytes;
  }

  /** Bytes held by `peer` now. */
  heldBy(peer: string | undefined): number {
    return this.byPeer.get(peer) ?? 0;
  }

  /**
   * Takes `n` more bytes for `h`, cutting larger holders to make room where that is fair; false
   * (and nothing taken) when it cannot fit.
   */
  take(h: BudgetHolder, n: number): boolean {
    if (n === 0) return true;
    const after = h.held + n;
    if (after > this.peerShareBytes || after > this.limitBytes) return false;
    while (this.heldBy(h.peer) + n > this.peerShareBytes) if (!this.evictLargest(after, h, h.peer)) return false;
    while (this.usedBytes + n > this.limitBytes) if (!this.evictLargest(after, h, null)) return false;
    if (h.held === 0) this.holders.add(h);
    h.held = after;
    this.usedBytes += n;
    this.byPeer.set(h.peer, this.heldBy(h.peer) + n);
    this.onChange(this.usedBytes);
    return true;
  }

  /** Gives back everything `h` holds. */
  release(h: BudgetHolder): void {
    if (h.held === 0) return;
    const n = h.held;
    h.held = 0;
    this.holders.delete(h);
    this.usedBytes = Math.max(0, this.usedBytes - n);
    const left = this.heldBy(h.peer) - n;
    if (left > 0) this.byPeer.set(h.peer, left);
    else this.byPeer.delete(h.peer);
    this.onChange(this.usedBytes);
  }

  /**
   * Cuts the largest holder (of `peer`, or of anyone when null) if it holds more than `than`
   * bytes, the taker excepted; whether one was cut. A scan: only under pressure, over at most the
   * connections the listener admits.
   */
  private evictLargest(than: number, taker: BudgetHolder, peer: string | undefined | null): boolean {
    let victim: BudgetHolder | undefined;
    for (const x of this.holders) {
      if (x === taker || (peer !== null && x.peer !== peer)) continue;
      if (x.held > than && (victim === undefined || x.held > victim.held)) victim = x;
    }
    if (victim === undefined) return false;
    // evict() ends the victim's read, which releases its bytes before it returns.
    victim.evict();
    if (victim.held > 0) this.release(victim);
    return true;
  }
}
