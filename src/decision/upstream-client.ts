import { Pool, errors as undiciErrors, type Dispatcher } from '../lib/undici.js';
import type { UpstreamConfig } from '../config/index.js';
import { Deadline, DeadlineQueue } from '../lib/deadline-queue.js';
import { DecisionError } from './errors.js';
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
 */
class CheckCall extends Deadline {
  settled = false;
  /** The current attempt's controller, once undici has dispatched it. */
  controller: Dispatcher.DispatchController | null = null;

  constructor(
    readonly timeoutMs: number,
    private readonly queue: DeadlineQueue,
    private readonly resolve: Settle,
    private readonly reject: Fail,
  ) {
    super(performance.now() + timeoutMs);
  }

  timeout(): void {
    this.settled = true;
    this.controller?.abort(new undiciErrors.RequestAbortedError());
    this.reject(new DecisionError('ERR_UPSTREAM_TIMEOUT', `no answer within ${this.timeoutMs} ms`));
  }

  succeed(result: CheckCallResult): void {
    if (this.settled) return;
    this.settled = true;
    this.queue.remove(this);
    this.resolve(result);
  }

  fail(err: unknown): void {
    if (this.settled) return;
    this.settled = true;
    this.queue.remove(this);
    this.reject(err);
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

  constructor(
    private readonly call: CheckCall,
    private readonly n: number,
    private readonly retry: () => void,
  ) {}

  onRequestStart(controller: Dispatcher.DispatchController): void {
    // A call whose deadline passed while it waited for a connection is cut now.
    if (this.call.settled) controller.abort(new undiciErrors.RequestAbortedError());
    else this.call.controller = controller;
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
    const call = this.call;
    if (call.settled) return;
    // Never a truncated body as if it were whole (abort normally ends in onResponseError).
    if (this.tooBig) return call.fail(this.tooBig);
    const body = this.chunks !== null ? Buffer.concat(this.chunks, this.size).toString('utf8') : this.first !== null ? this.first.toString('utf8') : '';
    call.succeed({ status: this.status, date: this.date, body, attempts: this.n });
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    const call = this.call;
    if (call.settled) return;
    if (this.tooBig) return call.fail(this.tooBig);
    if (!this.headersReceived && this.n === 1 && isRetryable(err)) return this.retry();
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
  private readonly deadlines = new DeadlineQueue();
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
    this.checkPath = joinPath(cfg.baseUrl, '/v1/authorization/check');
    this.userAgent = options.userAgent ?? 'consent-sidecar';
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
   * {@link DecisionError} `ERR_UPSTREAM_TIMEOUT` or `ERR_UPSTREAM_NETWORK`.
   */
  check(body: string, traceHeaders?: readonly string[]): Promise<CheckCallResult> {
    return new Promise<CheckCallResult>((resolve, reject) => {
      const call = new CheckCall(this.cfg.timeoutMs, this.deadlines, resolve, reject);
      this.deadlines.add(call);
      this.attempt(call, body, 1, traceHeaders);
    });
  }

  private attempt(call: CheckCall, body: string, n: number, traceHeaders: readonly string[] | undefined): void {
    const handler = new CheckAttempt(call, n, () => this.attempt(call, body, 2, traceHeaders));
    const headers = traceHeaders === undefined ? this.headersNow() : [...this.headersNow(), ...traceHeaders];
    try {
      this.pool.dispatch({ method: 'POST', path: this.checkPath, headers, body }, handler);
    } catch (err) {
      call.fail(new DecisionError('ERR_UPSTREAM_NETWORK', `service unreachable: ${codeOf(err)}`, { cause: err }));
    }
  }

  async close(): Promise<void> {
    await this.pool.close();
    this.deadlines.clear();
  }

  /** Aborts whatever is still in flight and closes every connection (shutdown past its budget). */
  async destroy(): Promise<void> {
    await this.pool.destroy();
    this.deadlines.clear();
  }
}

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
