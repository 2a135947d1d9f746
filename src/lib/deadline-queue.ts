/** Something with a deadline (monotonic ms, the global `performance.now()`) that is ended when it passes. */
export interface Deadline {
  readonly deadline: number;
  /** Set once the work ended one way or another; a settled entry is skipped. */
  settled: boolean;
  /** Called once, at the deadline, if the entry is not settled by then. */
  timeout(): void;
}

/**
 * Deadlines for work that all has the same timeout, so they come in the order the work starts:
 * one FIFO and one timer armed for the oldest live entry serve them all, instead of a timer (and
 * often an AbortController) per call. A settled entry stays queued until it reaches the front,
 * where it is skipped in O(1). Adding an entry whose deadline is earlier than one already queued
 * breaks the order: callers use one queue per fixed timeout.
 */
export class DeadlineQueue {
  private q: Deadline[] = [];
  private head = 0;
  private timer: NodeJS.Timeout | null = null;

  add(entry: Deadline): void {
    this.q.push(entry);
    if (this.timer === null) this.arm();
  }

  private arm(): void {
    const q = this.q;
    while (this.head < q.length && q[this.head]!.settled) this.head++;
    if (this.head > 1024 && this.head * 2 > q.length) {
      this.q = q.slice(this.head);
      this.head = 0;
    }
    if (this.head === this.q.length) {
      this.q = [];
      this.head = 0;
      this.timer = null;
      return;
    }
    this.timer = setTimeout(this.fire, Math.max(0, Math.ceil(this.q[this.head]!.deadline - performance.now())));
  }

  private readonly fire = (): void => {
    const now = performance.now();
    const q = this.q;
    while (this.head < q.length && (q[this.head]!.settled || q[this.head]!.deadline <= now)) {
      const entry = q[this.head++]!;
      if (!entry.settled) entry.timeout();
    }
    this.arm();
  };

  /** Stops the timer (shutdown); entries still queued never time out. */
  clear(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
