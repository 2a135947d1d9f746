import type { IncomingMessage } from 'node:http';
import { performance } from 'node:perf_hooks';
import { Deadline, type DeadlineQueue } from '../lib/deadline-queue.js';
import { singleRaw } from '../lib/headers.js';
import type { BudgetHolder, UnverifiedBudget } from './unverified-budget.js';
import type { BodyVerifier, VerifyResult } from './verify.js';

export type UnverifiedBodyResult =
  | { readonly ok: true; readonly body: Buffer; readonly verified: VerifyResult }
  | { readonly ok: false; readonly reason: 'too_large' | 'over_budget' | 'body_timeout' | 'too_slow' | 'aborted' };

export interface ReadUnverifiedOptions {
  /** Largest body accepted (`--webhook-max-body-bytes`); beyond, `too_large`. */
  readonly maxBytes: number;
  /** Shared by every connection (`--webhook-max-unverified-bytes`); beyond, `over_budget`. */
  readonly budget: UnverifiedBudget;
  /** Time the whole body has to arrive (`--webhook-body-timeout-ms`); beyond, `body_timeout`. */
  readonly timeoutMs: number;
  /** Where the deadline waits: one queue for every read with this `timeoutMs` (no timer per body). */
  readonly deadlines: DeadlineQueue;
  /** Fed every chunk as it arrives: the HMAC is computed incrementally, never over a joined copy. */
  readonly verifier: BodyVerifier;
  /** Cuts bodies that arrive slower than the minimum data rate (`--webhook-min-body-rate-bytes`). */
  readonly rates: SlowBodyWatch;
}

/**
 * The minimum data rate of unverified bodies: once `graceMs` has passed, a body must have brought
 * `minBytesPerS` for every second beyond it (or all it declared), or it is cut (`too_slow`). One
 * timer for every read, running only while reads are open.
 */
export class SlowBodyWatch {
  private readonly reads = new Set<BodyRead>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    /** Bytes a second (0: off). */
    readonly minBytesPerS: number,
    /** Time a body has before the rate applies (ms). */
    readonly graceMs: number,
    /** How often the open reads are looked at (ms). */
    private readonly intervalMs = 250,
  ) {}

  add(r: BodyRead): void {
    if (this.minBytesPerS <= 0) return;
    this.reads.add(r);
    if (this.timer === null) {
      this.timer = setInterval(() => this.sweep(), this.intervalMs);
      this.timer.unref();
    }
  }

  remove(r: BodyRead): void {
    this.reads.delete(r);
  }

  close(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.reads.clear();
  }

  private sweep(): void {
    if (this.reads.size === 0) {
      clearInterval(this.timer!);
      this.timer = null;
      return;
    }
    const now = performance.now();
    for (const r of [...this.reads]) {
      const due = ((now - r.startedAt - this.graceMs) * this.minBytesPerS) / 1000;
      if (due > 0 && r.received < Math.min(due, r.declaredBytes)) r.tooSlow();
    }
  }
}

/**
 * Reads the raw body of a delivery whose headers passed but whose signature is not verified yet.
 * Every byte held is taken from the shared budget as it arrives (a declared `content-length` takes
 * nothing; one over the limit is refused before a byte is read) and given back as soon as the
 * verdict is known or the read fails; the budget may cut this read to make room for a smaller one
 * (`over_budget`). On failure the chunks are dropped at once; with `too_large` the rest of the body
 * still flows, to nowhere, so the client can read its 413.
 */
export function readUnverifiedBody(req: IncomingMessage, o: ReadUnverifiedOptions): Promise<UnverifiedBodyResult> {
  // From the raw list: `req.headers` would build an object of every header for this one.
  const length = singleRaw(req.rawHeaders, 'content-length');
  const declared = typeof length === 'string' ? Number(length) : Number.NaN;
  if (Number.isFinite(declared) && declared > o.maxBytes) return Promise.resolve({ ok: false, reason: 'too_large' });
  return new Promise((resolve, reject) => new BodyRead(req, o, Number.isFinite(declared) ? declared : Infinity, resolve, reject).start());
}

type Failure = { readonly ok: false; readonly reason: 'error'; readonly err: unknown };

/**
 * One body being read: its state, its deadline (in the listener's queue: no timer per delivery),
 * its share of the budget and its listeners, bound once.
 */
class BodyRead extends Deadline implements BudgetHolder {
  private chunks: Buffer[] = [];
  private size = 0;
  private settled = false;
  /** Bytes taken from the budget (the budget keeps it). */
  held = 0;
  readonly peer: string | undefined;
  readonly startedAt = performance.now();
  private readonly onData = (chunk: Buffer): void => this.data(chunk);
  private readonly onEnd = (): void => this.done(this.whole);
  private readonly onAborted = (): void => this.done(ABORTED);
  private readonly whole = (): UnverifiedBodyResult => {
    const chunks = this.chunks;
    return { ok: true, verified: this.o.verifier.finish(), body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, this.size) };
  };

  constructor(
    private readonly req: IncomingMessage,
    private readonly o: ReadUnverifiedOptions,
    /** The declared length, or Infinity when none (chunked). */
    readonly declaredBytes: number,
    private readonly resolve: (r: UnverifiedBodyResult) => void,
    private readonly reject: (err: unknown) => void,
  ) {
    super(performance.now() + o.timeoutMs);
    this.peer = req.socket.remoteAddress;
  }

  /** Bytes received so far. */
  get received(): number {
    return this.size;
  }

  evict(): void {
    this.done(OVER_BUDGET);
  }

  tooSlow(): void {
    this.done(TOO_SLOW);
  }

  start(): void {
    this.o.deadlines.add(this);
    this.o.rates.add(this);
    const req = this.req;
    req.on('data', this.onData);
    req.on('end', this.onEnd);
    req.on('aborted', this.onAborted);
    req.on('error', this.onAborted);
  }

  timeout(): void {
    this.done(BODY_TIMEOUT);
  }

  private data(chunk: Buffer): void {
    const o = this.o;
    this.size += chunk.length;
    if (this.size > o.maxBytes) return this.done(TOO_LARGE);
    if (!o.budget.take(this, chunk.length)) return this.done(OVER_BUDGET);
    try {
      o.verifier.update(chunk);
    } catch (err) {
      return this.done(() => {
        throw err;
      });
    }
    this.chunks.push(chunk);
  }

  private done(result: UnverifiedBodyResult | (() => UnverifiedBodyResult)): void {
    if (this.settled) return;
    this.settled = true;
    const { req, o } = this;
    o.deadlines.remove(this);
    o.rates.remove(this);
    req.off('data', this.onData);
    req.off('end', this.onEnd);
    req.off('aborted', this.onAborted);
    req.off('error', this.onAborted);
    let r: UnverifiedBodyResult | Failure;
    try {
      r = typeof result === 'function' ? result() : result;
    } catch (err) {
      r = { ok: false, reason: 'error', err };
    }
    this.chunks = [];
    o.budget.release(this);
    req.on('error', ignore);
    // too_large: the rest flows to nowhere so the client reads its 413. Over budget, too slow or
    // failed: nothing more is read; the listener answers and closes.
    if (!r.ok && r.reason === 'too_large') req.resume();
    else if (!r.ok) req.pause();
    // Thrown inside a stream event it would crash the process: the caller gets it instead.
    if (!r.ok && r.reason === 'error') this.reject(r.err);
    else this.resolve(r);
  }
}

const ignore = (): void => undefined;
const TOO_LARGE: UnverifiedBodyResult = Object.freeze({ ok: false, reason: 'too_large' });
const OVER_BUDGET: UnverifiedBodyResult = Object.freeze({ ok: false, reason: 'over_budget' });
const BODY_TIMEOUT: UnverifiedBodyResult = Object.freeze({ ok: false, reason: 'body_timeout' });
const TOO_SLOW: UnverifiedBodyResult = Object.freeze({ ok: false, reason: 'too_slow' });
const ABORTED: UnverifiedBodyResult = Object.freeze({ ok: false, reason: 'aborted' });
