/**
 * Work with a deadline (monotonic ms, the global `performance.now()`), ended by a
 * {@link DeadlineQueue} when it passes. The queue links its entries through these fields, so
 * queuing allocates nothing.
 */
export abstract class Deadline {
  /** The queue's links (its business only). */
  prevDue: Deadline | null = null;
  nextDue: Deadline | null = null;
  /** In a queue: added and neither removed nor timed out yet. */
  queued = false;

  constructor(readonly deadline: number) {}

  /** Called once, at the deadline, if the entry is still queued (it has just left the queue). */
  abstract timeout(): void;
}

/**
 * Deadlines for work that all has the same timeout, so they come in the order the work starts:
 * one FIFO (a linked list through the entries) and one timer armed for the oldest entry serve them
 * all, instead of a timer (and often an AbortController) per call.
 *
 * Work that ends is {@link remove}d at once, in O(1): the queue holds only what is in flight.
 * (It used to keep a finished entry until the oldest deadline's timer reached it, which at 25,000
 * checks a second and a 2 s timeout held 50,000 finished calls, and all they referenced, long
 * enough to be promoted: a quarter of the miss path's CPU went to the old generation's GC.)
 *
 * Adding an entry whose deadline is earlier than one already queued breaks the order: callers use
 * one queue per fixed timeout.
 */
export class DeadlineQueue {
  private head: Deadline | null = null;
  private tail: Deadline | null = null;
  private timer: NodeJS.Timeout | null = null;

  add(entry: Deadline): void {
    if (entry.queued) return;
    entry.queued = true;
    entry.prevDue = this.tail;
    entry.nextDue = null;
    if (this.tail === null) this.head = entry;
    else this.tail.nextDue = entry;
    this.tail = entry;
    // The timer, once armed, stays armed for the oldest deadline even if that entry leaves: it
    // then fires early, finds nothing due and re-arms, about once per timeout, instead of a
    // clearTimeout and setTimeout whenever the queue empties (every call, at low concurrency).
    if (this.timer === null) this.arm(performance.now());
  }

  /** The work ended: the entry leaves the queue (nothing happens if it is not in it). */
  remove(entry: Deadline): void {
    if (!entry.queued) return;
    entry.queued = false;
    const { prevDue, nextDue } = entry;
    if (prevDue === null) this.head = nextDue;
    else prevDue.nextDue = nextDue;
    if (nextDue === null) this.tail = prevDue;
    else nextDue.prevDue = prevDue;
    entry.prevDue = null;
    entry.nextDue = null;
  }

  private arm(now: number): void {
    this.timer = this.head === null ? null : setTimeout(this.fire, Math.max(0, Math.ceil(this.head.deadline - now)));
  }

  private readonly fire = (): void => {
    const now = performance.now();
    for (let e = this.head; e !== null && e.deadline <= now; e = this.head) {
      this.remove(e);
      e.timeout();
    }
    this.arm(performance.now());
  };

  /** Stops the timer (shutdown); entries still queued never time out. */
  clear(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}

/**
 * Deadlines of several fixed timeouts, whole ms: a {@link DeadlineQueue} for each timeout in use,
 * made when first asked for and kept (callers bound the timeouts they ask for, so the queues are
 * few: a queue holds a timer only while it has entries).
 */
export class DeadlineQueues {
  private readonly queues = new Map<number, DeadlineQueue>();

  /** The queue of deadlines `timeoutMs` (whole ms) after their work starts. */
  for(timeoutMs: number): DeadlineQueue {
    let q = this.queues.get(timeoutMs);
    if (q === undefined) this.queues.set(timeoutMs, (q = new DeadlineQueue()));
    return q;
  }

  /** Stops every queue's timer (shutdown). */
  clear(): void {
    for (const q of this.queues.values()) q.clear();
  }
}
