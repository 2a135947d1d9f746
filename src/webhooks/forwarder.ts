import { performance } from 'node:perf_hooks';
import { Pool, type Dispatcher } from 'undici';
import { DeadlineQueue, type Deadline } from '../lib/deadline-queue.js';
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

export interface ForwarderOptions {
  /** Where verified events go, e.g. `http://127.0.0.1:8080/webhooks`. */
  readonly appUrl: URL;
  /** Whole exchange with the app, connect to last body byte (ms). */
  readonly timeoutMs: number;
  /** Keep-alive connections to the app. */
  readonly connections?: number;
}

/** Keep-alive connections to the app; enough for a burst of retries after an outage. */
const DEFAULT_APP_CONNECTIONS = 128;

/** Posts verified events to the app over a keep-alive pool. */
export class Forwarder {
  private readonly pool: Pool;
  private readonly path: string;
  private readonly timeoutMs: number;
  private readonly deadlines = new DeadlineQueue();

  constructor(options: ForwarderOptions) {
    if (options.appUrl.protocol !== 'http:' && options.appUrl.protocol !== 'https:') {
      throw new RangeError(`Forwarder: appUrl must be http(s), got ${options.appUrl.protocol}`);
    }
    this.pool = new Pool(options.appUrl.origin, {
      connections: options.connections ?? DEFAULT_APP_CONNECTIONS,
      keepAliveTimeout: 4000,
      connectTimeout: options.timeoutMs,
    });
    this.path = `${options.appUrl.pathname}${options.appUrl.search}`;
    this.timeoutMs = options.timeoutMs;
  }

  /**
   * POSTs `rawBody` unchanged; ok only on a 2xx answer within the timeout, which covers the whole
   * exchange (waiting for a pooled connection included). Uses undici's handler API rather than
   * `request()`: no response stream or promise per event, which is most of the forwarding cost.
   */
  forward(rawBody: Buffer, headers: Record<string, string>): Promise<ForwardResult> {
    return new Promise((resolve) => {
      let status = 0;
      let controller: Dispatcher.DispatchController | undefined;
      // One timer for every forward (they all have the same timeout): see DeadlineQueue.
      const call: Deadline = {
        deadline: performance.now() + this.timeoutMs,
        settled: false,
        timeout: () => {
          finish({ ok: false, cause: 'timeout', detail: `no answer within ${this.timeoutMs} ms` });
          controller?.abort(new Error('forward timeout'));
        },
      };
      const finish = (result: ForwardResult): void => {
        if (call.settled) return;
        call.settled = true;
        resolve(result);
      };
      const accepted = (): boolean => status >= 200 && status < 300;
      this.deadlines.add(call);

      this.pool.dispatch(
        { path: this.path, method: 'POST', headers, body: rawBody },
        {
          onRequestStart: (c) => {
            controller = c;
            // Still queued when the timeout fired: drop it before it reaches the app.
            if (call.settled) c.abort(new Error('forward timeout'));
          },
          onResponseStart: (_c, statusCode) => {
            if (statusCode >= 200) status = statusCode;
          },
          // The app's answer body is read and dropped so the connection can be reused.
          onResponseData: () => undefined,
          onResponseEnd: () =>
            finish(accepted() ? { ok: true, status } : { ok: false, cause: 'status', status, detail: `app answered ${status}` }),
          onResponseError: (_c, err) => {
            // The status line is the app's answer; a body cut short afterwards does not undo a 2xx.
            if (accepted()) return finish({ ok: true, status });
            const code = (err as { code?: unknown }).code;
            finish({ ok: false, cause: 'network', detail: typeof code === 'string' ? code : 'network error' });
          },
        },
      );
    });
  }

  async close(): Promise<void> {
    await this.pool.close();
    this.deadlines.clear();
  }

  /** Aborts forwards still in flight and closes every connection (shutdown past its budget). */
  async destroy(): Promise<void> {
    await this.pool.destroy();
    this.deadlines.clear();
  }
}
