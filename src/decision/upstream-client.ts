import { Pool, errors as undiciErrors, type Dispatcher } from '../lib/undici.js';
import type { UpstreamConfig } from '../config/index.js';
import { Deadline, DeadlineQueue } from '../lib/deadline-queue.js';
import { Admission, type Waiter } from './admission.js';
import { DecisionError, FAIR_BUDGET_FRACTION } from './errors.js';
import type { UpstreamResponse } from './parse-response.js';

/** Largest upstream body read for a check; a bigger answer is malformed by definition. */
export const MAX_UPSTREAM_BODY_BYTES = 65_536;

/** Errors that mean the request never got an answer, so the one retry is allowed. */
const RETRYABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EAI_AGAIN',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_CLOSED',
]);

export interface CheckCallResult extends UpstreamResponse {
  readonly attempts: number;
}

/** Joins the base URL's path and an API path, so a base of `https://x/consent` works. */
export function joinPath(base: URL, apiPath: string): string {
  return base.pathname.replace(/\/+$/, '') + apiPath;
}

type Settle = (result: CheckCallResult) => void;
type Fail = (err: unknown) => void;

/**
 * One check in flight: its deadline (on the global `performance.now()`, the clock the
 * {@link DeadlineQueue} compares it with, so a test that freezes that clock freezes both), how to end
 * it, and the attempt under way. One object per call (and one per attempt) with methods, not a
 * dozen closures: the miss path allocates little. It leaves the queue the moment it ends.
 *
 * Where it is decides what its deadline means: waiting for a connection (the {@link Admission}'s
 * queue) is the sidecar's own wait, `ERR_OVERLOADED`, never the service's failure; in the pool, its
 * request written (or its connection being opened) is the service's time, `ERR_UPSTREAM_TIMEOUT`.
 * That timeout is the service's failure only when the service had a fair budget: at least
 * {@link FAIR_BUDGET_FRACTION} of the deadline from when the check was handed to the pool. One sent
 * later (it waited here first) is `sentLate`: the app still gets `upstream_timeout`, the circuit
 * breaker does not count it.
 */
class CheckCall extends Deadline implements Waiter {
  settled = false;
  /** The current attempt's controller, once undici has dispatched it. */
  controller: Dispatcher.DispatchController | null = null;
  /** When the current attempt's request was written to a connection (monotonic ms), or -1. */
  writtenAt = -1;
  /** When the check was first handed to the pool (monotonic ms), or -1: from then on its time is the service's. */
  sentAt = -1;
  /** Holds one of the pool's connections: handed to undici and not yet let go by it. */
  pooled = false;
  prevWait: Waiter | null = null;
  nextWait: Waiter | null = null;
  waiting = false;

  constructor(
    readonly client: UpstreamClient,
    readonly body: string,
    readonly traceHeaders: readonly string[] | undefined,
    private readonly resolve: Settle,
    private readonly reject: Fail,
  ) {
    super(performance.now() + client.timeoutMs);
  }

  /** The admission gave it a connection. */
  send(): void {
    this.client.dispatch(this, 1);
  }

  /** It cannot be sent in time: overload, now, not at its deadline. */
  shed(why: string): void {
    this.fail(new DecisionError('ERR_OVERLOADED', `not sent: ${why}`));
  }

  timeout(): void {
    this.settled = true;
    const client = this.client;
    if (this.waiting) {
      client.admission.leave(this);
      this.reject(new DecisionError('ERR_OVERLOADED', `not sent: no connection to the service came free within ${client.timeoutMs} ms`));
      return;
    }
    // The service's share of the deadline: from when the check was handed to the pool. Less than a
    // fair budget (it waited here for a connection first) and its timeout is not the service failing.
    const now = performance.now();
    const budget = this.sentAt >= 0 ? this.deadline - this.sentAt : 0;
    const sentLate = budget < client.timeoutMs * FAIR_BUDGET_FRACTION;
    const late = sentLate ? `, sent with ${Math.round(budget)} ms of it left after waiting for a connection` : '';
    if (this.writtenAt >= 0) {
      // How long the service has kept it: a lower bound of its answer time, so it may raise the
      // estimate, never lower it (a late-sent check's short wait says nothing of a slow answer).
      client.admission.observeAtLeast(now - this.writtenAt);
      this.controller?.abort(new undiciErrors.RequestAbortedError());
      this.reject(new DecisionError('ERR_UPSTREAM_TIMEOUT', `no answer within the ${client.timeoutMs} ms deadline${late}`, { sentLate }));
    } else {
      // Not written while it held a connection of its own: the service's side did not take it in
      // time. That wait is a lower bound of its answer time too: raised by it, the estimate sends
      // the next checks with a fair budget, whose timeouts then count, so a service whose address
      // no longer answers still opens the breaker under load (every send late, none counted, else).
      if (this.sentAt >= 0) client.admission.observeAtLeast(now - this.sentAt);
      this.reject(new DecisionError('ERR_UPSTREAM_TIMEOUT', `no connection to the service within the ${client.timeoutMs} ms deadline${late}`, { sentLate }));
    }
  }

  succeed(result: CheckCallResult): void {
    if (this.settled) return;
    this.settled = true;
    this.client.deadlines.remove(this);
    this.resolve(result);
  }

  fail(err: unknown): void {
    if (this.settled) return;
    this.settled = true;
    this.client.deadlines.remove(this);
    this.client.admission.leave(this);
    this.reject(err);
  }

  /** The pool let go of the attempt, with no other to follow: its connection is free for the next check. */
  released(): void {
    if (!this.pooled) return;
    this.pooled = false;
    this.client.admission.release();
  }
}

/** One attempt of a call: undici's handler, reading the status, `Date` and the whole body. */
class CheckAttempt implements Dispatcher.DispatchHandler {
  private status = 0;
  private date: string | undefined = undefined;
  private headersReceived = false;
  /** The body: its first chunk, then every chunk once there are several. */
  private first: Buffer | null = null;
  private chunks: Buffer[] | null = null;
  private size = 0;
  private tooBig: DecisionError | null = null;
  private ended = false;

  constructor(
    private readonly call: CheckCall,
    private readonly n: number,
  ) {}

  onRequestStart(controller: Dispatcher.DispatchController): void {
    // undici calls this as it writes the request to a connection. A call whose deadline passed
    // while its connection was being opened is cut now.
    if (this.call.settled) controller.abort(new undiciErrors.RequestAbortedError());
    else {
      this.call.controller = controller;
      this.call.writtenAt = performance.now();
    }
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[] | undefined>): void {
    if (statusCode < 200) return; // 1xx: the answer is still to come
    this.headersReceived = true;
    this.status = statusCode;
    this.date = latestDate(headers.date);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.size += chunk.length;
    if (this.size > MAX_UPSTREAM_BODY_BYTES) {
      this.tooBig ??= new DecisionError('ERR_UPSTREAM_MALFORMED', `body larger than ${MAX_UPSTREAM_BODY_BYTES} bytes`);
      controller.abort(this.tooBig);
      return;
    }
    if (this.first === null) this.first = chunk;
    else (this.chunks ??= [this.first]).push(chunk);
  }

  onResponseEnd(): void {
    if (this.ended) return;
    this.ended = true;
    const call = this.call;
    // Timed before the connection goes to the next check, so that check is judged by it.
    if (!call.settled && !this.tooBig) call.client.admission.observe(performance.now() - call.writtenAt);
    call.released();
    if (call.settled) return;
    // Never a truncated body as if it were whole (abort normally ends in onResponseError).
    if (this.tooBig) return call.fail(this.tooBig);
    const body = this.chunks !== null ? Buffer.concat(this.chunks, this.size).toString('utf8') : this.first !== null ? this.first.toString('utf8') : '';
    call.succeed({ status: this.status, date: this.date, body, attempts: this.n });
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    if (this.ended) return;
    this.ended = true;
    const call = this.call;
    if (!call.settled && !this.tooBig && !this.headersReceived && this.n === 1 && isRetryable(err)) {
      // The retry keeps the connection slot: it is the same check.
      call.client.dispatch(call, 2);
      return;
    }
    call.released();
    if (call.settled) return;
    if (this.tooBig) return call.fail(this.tooBig);
    call.fail(new DecisionError('ERR_UPSTREAM_NETWORK', `service unreachable: ${codeOf(err)}`, { cause: err }));
  }
}

/**
 * The keep-alive client for authorization checks, on undici's dispatch API (no per-call stream,
 * promise chain or AbortController). One deadline covers everything: connecting, the headers and
 * the whole body, so a service that trickles its body cannot hold a check past it. At most one
 * retry, only when the connection failed before any response and only inside the same deadline
 * (the check is stateless, so a repeat is safe).
 */
export class UpstreamClient {
  private readonly pool: Pool;
  private readonly checkPath: string;
  private readonly userAgent: string;
  /** @internal The deadline of every call in flight or waiting. */
  readonly deadlines = new DeadlineQueue();
  /** @internal Who gets one of the pool's connections, and who is told `overload` (src/decision/admission.ts). */
  readonly admission: Admission;
  private headersFor = '';
  private headers: string[] = [];

  constructor(
    private readonly cfg: UpstreamConfig,
    options: { connections: number; userAgent?: string },
  ) {
    this.pool = new Pool(cfg.baseUrl.origin, {
      connections: options.connections,
      keepAliveTimeout: 30_000,
      // The deadline below is the real limit; these only bound a stuck socket.
      headersTimeout: 0,
      bodyTimeout: 0,
      connectTimeout: cfg.timeoutMs,
    });
    this.admission = new Admission({ connections: options.connections, timeoutMs: cfg.timeoutMs });
    this.checkPath = joinPath(cfg.baseUrl, '/v1/authorization/check');
    this.userAgent = options.userAgent ?? 'consent-sidecar';
  }

  /** Whole deadline of one check (ms). */
  get timeoutMs(): number {
    return this.cfg.timeoutMs;
  }

  /** The request headers, rebuilt only when the API key changed (a rotated file). */
  private headersNow(): string[] {
    const key = this.cfg.apiKey.current();
    if (key !== this.headersFor) {
      this.headersFor = key;
      this.headers = ['authorization', `Bearer ${key}`, 'content-type', 'application/json', 'accept', 'application/json', 'user-agent', this.userAgent];
    }
    return this.headers;
  }

  /**
   * Sends one check, with `traceHeaders` (W3C trace context name/value pairs) when given; throws
   * {@link DecisionError} `ERR_UPSTREAM_TIMEOUT` or `ERR_UPSTREAM_NETWORK` for what the service (or
   * the way to it) did, `ERR_OVERLOADED` when the check could not be sent in time (it waited for a
   * connection here, or would have to: see {@link Admission}).
   */
  check(body: string, traceHeaders?: readonly string[]): Promise<CheckCallResult> {
    return new Promise<CheckCallResult>((resolve, reject) => {
      const call = new CheckCall(this, body, traceHeaders, resolve, reject);
      const admitted = this.admission.enter(call);
      if (admitted === 'send') {
        this.deadlines.add(call);
        this.dispatch(call, 1);
      } else if (admitted === 'wait') this.deadlines.add(call);
      else call.fail(new DecisionError('ERR_OVERLOADED', `not sent: ${admitted}`));
    });
  }

  /** @internal Attempt `n` of `call`, on the connection it holds. */
  dispatch(call: CheckCall, n: number): void {
    call.pooled = true;
    if (n === 1) call.sentAt = performance.now();
    call.writtenAt = -1;
    call.controller = null;
    const handler = new CheckAttempt(call, n);
    const headers = call.traceHeaders === undefined ? this.headersNow() : [...this.headersNow(), ...call.traceHeaders];
    try {
      this.pool.dispatch({ method: 'POST', path: this.checkPath, headers, body: call.body }, handler);
    } catch (err) {
      call.released();
      call.fail(new DecisionError('ERR_UPSTREAM_NETWORK', `service unreachable: ${codeOf(err)}`, { cause: err }));
    }
  }

  async close(): Promise<void> {
    this.admission.drain((w) => (w as CheckCall).fail(CLOSING));
    await this.pool.close();
    this.deadlines.clear();
  }

  /** Aborts whatever is still in flight and closes every connection (shutdown past its budget). */
  async destroy(): Promise<void> {
    this.admission.drain((w) => (w as CheckCall).fail(CLOSING));
    await this.pool.destroy();
    this.deadlines.clear();
  }
}

/** What a check still waiting for a connection gets when the client closes. */
const CLOSING = new DecisionError('ERR_UPSTREAM_NETWORK', 'service unreachable: the sidecar is shutting down');

/**
 * A repeated `Date` header must not switch the skew rule off: the latest of the values is the one
 * that makes cache entries die soonest, which is the safe reading.
 */
function latestDate(value: string | string[] | undefined): string | undefined {
  if (value === undefined || typeof value === 'string') return value;
  let best: string | undefined;
  let bestMs = -Infinity;
  for (const v of value) {
    const ms = Date.parse(v);
    if (Number.isFinite(ms) && ms > bestMs) [best, bestMs] = [v, ms];
  }
  return best;
}

function codeOf(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : err instanceof Error ? err.name : 'unknown';
}

function isRetryable(err: unknown): boolean {
  if (err instanceof undiciErrors.RequestAbortedError) return false;
  return RETRYABLE_CODES.has(codeOf(err)) || RETRYABLE_CODES.has(codeOf((err as { cause?: unknown }).cause));
}
