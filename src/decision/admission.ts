/**
 * A check waiting for one of the pool's connections. The {@link Admission} links waiting checks
 * through these fields (its business only), so waiting allocates nothing.
 */
export interface Waiter {
  /** When the check's deadline passes (monotonic ms, the global `performance.now()`). */
  readonly deadline: number;
  prevWait: Waiter | null;
  nextWait: Waiter | null;
  /** In the admission's queue: neither sent nor shed nor gone yet. */
  waiting: boolean;
  /** A connection is the check's now: send it (it holds the connection until {@link Admission.release}). */
  send(): void;
  /** It can no longer be answered in time: answer `overload` now. `why` says so for the log. */
  shed(why: string): void;
}

/** Weight of each new service time in the latency estimate (an exponentially weighted mean, as TCP's smoothed RTT). */
export const LATENCY_WEIGHT = 1 / 8;
/**
 * A check is sent only with more than this many service times (the latency estimate) of its
 * deadline left: one for its own call and one of headroom for a service slower than its mean. Sent
 * with less, it would likely time out at the service (a timeout the circuit breaker counts when
 * the check still had half of its deadline when sent).
 */
export const SEND_HEADROOM_ROUNDS = 2;
/** The estimate never goes below this (ms): the bound stays a number however fast the service. */
export const MIN_LATENCY_MS = 1;
/** Before any answer has been timed, the service is assumed to answer in this fraction of the deadline. */
export const PRIOR_LATENCY_FRACTION = 1 / 8;

export interface AdmissionOptions {
  /** Connections of the pool: checks sent to the service at once. */
  readonly connections: number;
  /** Whole deadline of one check (ms): `--upstream-timeout-ms`. */
  readonly timeoutMs: number;
  /** Monotonic ms; `performance.now()` by default (the deadlines' clock). */
  readonly now?: () => number;
}

/**
 * Admission to the upstream connection pool (docs/decision-api.md, "Bursts: admission in front of the
 * pool"). At most `connections` checks are in the pool at once, each on a connection of its own, so
 * undici never queues one: a check waits for a connection only here, where that wait is known and
 * never mistaken for the service's slowness.
 *
 * The model: with `L` the service's recent answer time (an exponentially weighted mean of the time
 * from writing a request to its whole answer; a request that timed out after it was written counts
 * with the time it waited when that raises the estimate) and `T` the deadline, one connection
 * answers `⌊T/L⌋` checks in one deadline. A check that finds every connection busy waits, in the
 * worst case (every connection just started a call), one round of `L` per `connections` checks
 * ahead of it, and is sent only with more than {@link SEND_HEADROOM_ROUNDS} rounds left. So the queue holds at most
 * `connections × (⌊T/L⌋ − 2)` checks; one more is refused at once (`overload`), and so is a waiting
 * check as soon as no more than two rounds of its deadline are left (the estimate grew, or calls ran
 * long), and the newest waiting checks beyond the bound when the estimate grows. Nothing here waits
 * out its deadline to learn what the estimate already says.
 */
export class Admission {
  /** Checks in the pool: handed to undici and not yet let go by it. */
  private busy = 0;
  private head: Waiter | null = null;
  private tail: Waiter | null = null;
  private waiters = 0;
  private latency: number;
  private timed = false;
  private timer: NodeJS.Timeout | null = null;
  /** When the armed timer fires (monotonic ms). */
  private timerAt = Infinity;
  private readonly now: () => number;

  constructor(private readonly o: AdmissionOptions) {
    if (!(o.connections >= 1) || !(o.timeoutMs >= 1)) throw new RangeError('connections and timeoutMs must be >= 1');
    this.now = o.now ?? (() => performance.now());
    this.latency = o.timeoutMs * PRIOR_LATENCY_FRACTION;
  }

  /** The service's answer time the admission reckons with now (ms). */
  get latencyMs(): number {
    return this.latency;
  }

  /** Checks that may wait for a connection now: `connections × (⌊T/L⌋ − 2)`, never negative. */
  get queueBound(): number {
    return this.o.connections * Math.max(0, Math.floor(this.o.timeoutMs / this.latency) - SEND_HEADROOM_ROUNDS);
  }

  /** Checks waiting for a connection now. */
  get waiting(): number {
    return this.waiters;
  }

  /** Checks holding a connection now. */
  get sending(): number {
    return this.busy;
  }

  /**
   * A new check. `send`: a connection is its own now (dispatch it; {@link release} when the pool
   * lets go of it). `wait`: queued; {@link Waiter.send} or {@link Waiter.shed} is called later (or
   * {@link leave} takes it out). A string: refused now, saying why (`overload`).
   */
  enter(w: Waiter): 'send' | 'wait' | string {
    if (this.busy < this.o.connections && this.waiters === 0) {
      this.busy++;
      return 'send';
    }
    const bound = this.queueBound;
    if (this.waiters >= bound) return `${this.waiters} checks already wait for ${this.o.connections} connections (at most ${bound} with the service answering in ~${Math.round(this.latency)} ms)`;
    this.push(w);
    this.armFor(this.head!);
    return 'wait';
  }

  /** A check let go of its connection (the pool ended it): the next waiting check that can still make it gets it. */
  release(): void {
    if (this.busy > 0) this.busy--;
    this.pump();
  }

  /** A waiting check ended otherwise (its deadline, shutdown): it leaves the queue. */
  leave(w: Waiter): void {
    if (!w.waiting) return;
    this.unlink(w);
  }

  /** One service time (ms): from writing a request to its whole answer, or to its deadline. */
  observe(ms: number): void {
    if (!(ms >= 0)) return;
    this.latency = Math.max(MIN_LATENCY_MS, this.timed ? this.latency + LATENCY_WEIGHT * (ms - this.latency) : ms);
    this.timed = true;
    // A slower service makes the queue shorter at once: the newest waiting checks beyond it go now.
    const bound = this.queueBound;
    if (this.waiters > bound) {
      const why = `the service now answers in ~${Math.round(this.latency)} ms: ${this.o.connections} connections send at most ${bound} waiting checks in time, not ${this.waiters}`;
      for (let w = this.tail; w !== null && this.waiters > bound; w = this.tail) {
        this.unlink(w);
        w.shed(why);
      }
    }
    if (this.head !== null) this.armFor(this.head);
  }

  /**
   * A lower bound of one service time (ms): a check that timed out after it was written waited this
   * long and had no answer yet. Taken only when it raises the estimate: a check sent late times out
   * after a short wait, and taking that as its answer time would lower the estimate and send later
   * checks later still, with less of their deadline left.
   */
  observeAtLeast(ms: number): void {
    if (ms > this.latency) this.observe(ms);
  }

  /** Every waiting check, taken out and handed to `end` (shutdown). */
  drain(end: (w: Waiter) => void): void {
    for (let w = this.head; w !== null; w = this.head) {
      this.unlink(w);
      end(w);
    }
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.timerAt = Infinity;
  }

  /** When the waiting check `w` stops being worth sending: {@link SEND_HEADROOM_ROUNDS} answer times before its deadline. */
  private lastSendAt(w: Waiter): number {
    return w.deadline - SEND_HEADROOM_ROUNDS * this.latency;
  }

  /** Hands free connections to the oldest waiting checks; one that can no longer make it is shed instead. */
  private pump(): void {
    if (this.head === null) return;
    const now = this.now();
    for (let w = this.head; w !== null && this.busy < this.o.connections; w = this.head) {
      this.unlink(w);
      if (now >= this.lastSendAt(w)) {
        w.shed(this.tooLate(w, now));
        continue;
      }
      this.busy++;
      w.send();
    }
  }

  private tooLate(w: Waiter, now: number): string {
    return `waited for a connection until only ${Math.max(0, Math.round(w.deadline - now))} ms of the deadline were left, not more than ${SEND_HEADROOM_ROUNDS} answer times of the service (~${Math.round(this.latency)} ms)`;
  }

  /**
   * Arms the timer for when `w` (the oldest waiting check) stops being worth sending, unless it is
   * armed for earlier already. Armed once, it stays armed when that check leaves: it then fires
   * early, finds nothing due and re-arms, rather than a clear and a set on every send.
   */
  private armFor(w: Waiter): void {
    const at = this.lastSendAt(w);
    if (this.timer !== null && this.timerAt <= at) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(this.fire, Math.max(0, Math.ceil(at - this.now())));
  }

  private readonly fire = (): void => {
    this.timer = null;
    this.timerAt = Infinity;
    const now = this.now();
    for (let w = this.head; w !== null && now >= this.lastSendAt(w); w = this.head) {
      this.unlink(w);
      w.shed(this.tooLate(w, now));
    }
    if (this.head !== null) this.armFor(this.head);
  };

  private push(w: Waiter): void {
    w.waiting = true;
    w.prevWait = this.tail;
    w.nextWait = null;
    if (this.tail === null) this.head = w;
    else this.tail.nextWait = w;
    this.tail = w;
    this.waiters++;
  }

  private unlink(w: Waiter): void {
    w.waiting = false;
    const { prevWait, nextWait } = w;
    if (prevWait === null) this.head = nextWait;
    else prevWait.nextWait = nextWait;
    if (nextWait === null) this.tail = prevWait;
    else nextWait.prevWait = prevWait;
    w.prevWait = null;
    w.nextWait = null;
    this.waiters--;
  }
}
