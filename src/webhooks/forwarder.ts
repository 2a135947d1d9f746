import { Pool } from 'undici';
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

  /** POSTs `rawBody` unchanged; ok only on a 2xx answer received within the timeout. */
  async forward(rawBody: Buffer, headers: Record<string, string>): Promise<ForwardResult> {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), this.timeoutMs);
    try {
      const res = await this.pool.request({
        path: this.path,
        method: 'POST',
        headers,
        body: rawBody,
        signal: controller.signal,
      });
      try {
        // Read the answer to its end so the connection goes back to the pool.
        await res.body.dump({ limit: 65_536 });
      } catch {
        // The status line is the app's answer; a body cut short (or by our timeout) only costs the connection.
      }
      if (res.statusCode >= 200 && res.statusCode < 300) return { ok: true, status: res.statusCode };
      return { ok: false, cause: 'status', status: res.statusCode, detail: `app answered ${res.statusCode}` };
    } catch (err) {
      if (controller.signal.aborted) return { ok: false, cause: 'timeout', detail: `no answer within ${this.timeoutMs} ms` };
      const code = (err as { code?: unknown }).code;
      return { ok: false, cause: 'network', detail: typeof code === 'string' ? code : 'network error' };
    } finally {
      clearTimeout(timer);
    }
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}
