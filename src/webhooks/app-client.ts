import { performance } from 'node:perf_hooks';
import { Agent, type Dispatcher } from '../lib/undici.js';
import { Deadline, DeadlineQueue } from '../lib/deadline-queue.js';
import type { ForwardSigner } from './forward-signature.js';
import type { ForwardFailureCause } from './metrics.js';

/** Headers of the service passed to the app unchanged (interface document, Delivery headers). */
export const FORWARDED_HEADERS = [
  'content-type',
  'x-service-event-id',
  'x-service-delivery-id',
  'x-service-timestamp',
  'x-service-signature',
] as const;

export type ForwardResult =
  | { readonly ok: true; readonly status: number }
  | { readonly ok: false; readonly cause: ForwardFailureCause; readonly status?: number; readonly detail: string };

export interface AppClientOptions {
  /** Whole exchange with the app, connect to last body byte (ms), `--webhook-forward-timeout-ms`. */
  readonly timeoutMs: number;
  /** Keep-alive connections per app origin. */
  readonly connections?: number;
  /** Signs every forward (`--app-signing-secret[-file]`); without one, forwards are unsigned. */
  readonly signer?: ForwardSigner | null;
}

/** Keep-alive connections per app origin; enough for a burst of retries after an outage. */
const DEFAULT_APP_CONNECTIONS = 128;

/**
 * The one client of the application's webhook endpoints: passthrough forwards, the queue's workers
 * and the REDEC hand-over all post through it (one pool per app origin, kept alive), so every event
 * the app gets is signed here when a signer is configured.
 */
export class AppClient {
  private readonly agent: Agent;
  private readonly timeoutMs: number;
  private readonly deadlines = new DeadlineQueue();
  private readonly signer: ForwardSigner | null;

  constructor(options: AppClientOptions) {
    this.timeoutMs = options.timeoutMs;
    this.signer = options.signer ?? null;
    this.agent = new Agent({ connections: options.connections ?? DEFAULT_APP_CONNECTIONS, keepAliveTimeout: 4000, connectTimeout: options.timeoutMs });
  }

  /**
   * POSTs `rawBody` unchanged to `url` (http or https), signed when a signer is configured; ok only
   * on a 2xx answer within the timeout, which covers the whole exchange (waiting for a pooled
   * connection included). Uses undici's handler API rather than `request()`: no response stream or
   * promise per event, which is most of the forwarding cost.
   */
  forward(url: AppUrl, rawBody: Buffer | string, headers: Record<string, string>): Promise<ForwardResult> {
    if (this.signer) headers = this.signer.sign(rawBody, headers);
    return new Promise((resolve) => {
      // One timer for every forward (they all have the same timeout): see DeadlineQueue.
      const call = new ForwardCall(this.timeoutMs, this.deadlines, resolve);
      this.deadlines.add(call);
      this.agent.dispatch({ origin: url.origin, path: url.path, method: 'POST', headers, body: rawBody }, call);
    });
  }

  /** Aborts forwards still in flight and closes every connection. */
  async destroy(): Promise<void> {
    await this.agent.destroy();
    this.deadlines.clear();
  }
}

/** An app endpoint, split once: where to connect and what to ask for. */
export interface AppUrl {
  readonly origin: string;
  /** Path and query. */
  readonly path: string;
}

/** `url` as the app client posts to it; only http and https. */
export function appUrl(url: URL): AppUrl {
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new RangeError(`app URL must be http(s), got ${url.protocol}`);
  return Object.freeze({ origin: url.origin, path: `${url.pathname}${url.search}` });
}

/**
 * One forward: its deadline and undici's handler in one object (no closure per event), out of the
 * deadline queue the moment it ends.
 */
class ForwardCall extends Deadline implements Dispatcher.DispatchHandler {
  private settled = false;
  private status = 0;
  private controller: Dispatcher.DispatchController | null = null;

  constructor(
    private readonly timeoutMs: number,
    private readonly queue: DeadlineQueue,
    private readonly resolve: (result: ForwardResult) => void,
  ) {
    super(performance.now() + timeoutMs);
  }

  timeout(): void {
    this.finish({ ok: false, cause: 'timeout', detail: `no answer within ${this.timeoutMs} ms` });
    this.controller?.abort(new Error('forward timeout'));
  }

  onRequestStart(c: Dispatcher.DispatchController): void {
    this.controller = c;
    // Still queued when the timeout fired: drop it before it reaches the app.
    if (this.settled) c.abort(new Error('forward timeout'));
  }

  onResponseStart(_c: Dispatcher.DispatchController, statusCode: number): void {
    if (statusCode >= 200) this.status = statusCode;
  }

  /** The app's answer body is read and dropped so the connection can be reused. */
  onResponseData(): void {}

  onResponseEnd(): void {
    const status = this.status;
    this.finish(this.accepted() ? { ok: true, status } : { ok: false, cause: 'status', status, detail: `app answered ${status}` });
  }

  onResponseError(_c: Dispatcher.DispatchController, err: Error): void {
    // The status line is the app's answer; a body cut short afterwards does not undo a 2xx.
    if (this.accepted()) return this.finish({ ok: true, status: this.status });
    const code = (err as { code?: unknown }).code;
    this.finish({ ok: false, cause: 'network', detail: typeof code === 'string' ? code : 'network error' });
  }

  private accepted(): boolean {
    return this.status >= 200 && this.status < 300;
  }

  private finish(result: ForwardResult): void {
    if (this.settled) return;
    this.settled = true;
    this.queue.remove(this);
    this.resolve(result);
  }
}
