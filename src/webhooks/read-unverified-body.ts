import type { IncomingMessage } from 'node:http';
import { Deadline, type DeadlineQueue } from '../lib/deadline-queue.js';
import { singleRaw } from '../lib/headers.js';
import type { UnverifiedBudget } from './unverified-budget.js';
import type { BodyVerifier, VerifyResult } from './verify.js';

export type UnverifiedBodyResult =
  | { readonly ok: true; readonly body: Buffer; readonly verified: VerifyResult }
  | { readonly ok: false; readonly reason: 'too_large' | 'over_budget' | 'body_timeout' | 'aborted' };

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
}

/**
 * Reads the raw body of a delivery whose headers passed but whose signature is not verified yet.
 * Every byte held is taken from the shared budget first (a declared `content-length` is taken at
 * once, so a delivery that cannot fit is refused before a byte is read) and given back as soon as
 * the verdict is known or the read fails. On failure the chunks are dropped at once; with
 * `too_large` the rest of the body still flows, to nowhere, so the client can read its 413.
 */
export function readUnverifiedBody(req: IncomingMessage, o: ReadUnverifiedOptions): Promise<UnverifiedBodyResult> {
  // From the raw list: `req.headers` would build an object of every header for this one.
  const length = singleRaw(req.rawHeaders, 'content-length');
  const declared = typeof length === 'string' ? Number(length) : Number.NaN;
  if (Number.isFinite(declared) && declared > o.maxBytes) return Promise.resolve({ ok: false, reason: 'too_large' });
  let taken = 0;
  if (Number.isFinite(declared)) {
    if (!o.budget.tryTake(declared)) return Promise.resolve({ ok: false, reason: 'over_budget' });
    taken = declared;
  }
  return new Promise((resolve, reject) => new BodyRead(req, o, declared, taken, resolve, reject).start());
}

type Failure = { readonly ok: false; readonly reason: 'error'; readonly err: unknown };

/**
 * One body being read: its state, its deadline (in the listener's queue: no timer per delivery)
 * and its listeners, bound once.
 */
class BodyRead extends Deadline {
  private chunks: Buffer[] = [];
  private size = 0;
  private settled = false;
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
    private readonly declared: number,
    private taken: number,
    private readonly resolve: (r: UnverifiedBodyResult) => void,
    private readonly reject: (err: unknown) => void,
  ) {
    super(performance.now() + o.timeoutMs);
  }

  start(): void {
    this.o.deadlines.add(this);
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
    if (!Number.isFinite(this.declared)) {
      if (!o.budget.tryTake(chunk.length)) return this.done(OVER_BUDGET);
      this.taken += chunk.length;
    }
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
    o.budget.give(this.taken);
    this.taken = 0;
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
const ABORTED: UnverifiedBodyResult = Object.freeze({ ok: false, reason: 'aborted' });
