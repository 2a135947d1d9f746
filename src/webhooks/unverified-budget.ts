/**
 * The bytes the ingress may hold, across all connections, for bodies whose signature is not
 * verified yet (`--webhook-max-unverified-bytes`). An unauthenticated sender can make us buffer at
 * most this much in all; a delivery that would pass it is refused with 503 (the service retries).
 *
 * @example
 * const budget = new UnverifiedBudget(16 * 1024 * 1024, (n) => gauge.set(n));
 * if (!budget.tryTake(chunk.length)) refuse(); // …later: budget.give(taken)
 */
export class UnverifiedBudget {
  private usedBytes = 0;

  constructor(
    /** Bytes (> 0). */
    readonly limitBytes: number,
    private readonly onChange: (usedBytes: number) => void = () => undefined,
  ) {
    if (!Number.isSafeInteger(limitBytes) || limitBytes <= 0) throw new RangeError(`UnverifiedBudget: limitBytes must be a positive integer, got ${limitBytes}`);
  }

  get used(): number {
    return this.usedBytes;
  }

  /** Takes `n` bytes if they fit; false (and nothing taken) otherwise. */
  tryTake(n: number): boolean {
    if (this.usedBytes + n > this.limitBytes) return false;
    this.usedBytes += n;
    this.onChange(this.usedBytes);
    return true;
  }

  /** Gives back bytes taken earlier. */
  give(n: number): void {
    if (n === 0) return;
    this.usedBytes = Math.max(0, this.usedBytes - n);
    this.onChange(this.usedBytes);
  }
}
