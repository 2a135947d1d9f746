import type { IncomingMessage, ServerResponse } from 'node:http';
import { Pool } from '../lib/undici.js';
import type { UpstreamConfig } from '../config/index.js';
import { joinPath } from './upstream-client.js';

/** Connection-level headers that never cross a proxy (RFC 9110 §7.6.1), either way. */
const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade'];
/** Beside those, never sent to the service: ours to set (`host`, the key) or not the app's to ask for. */
const DROP_REQUEST = new Set([...HOP_BY_HOP, 'host', 'authorization', 'proxy-authorization', 'expect']);
/** Beside those, never passed back: replaced by `no-store` (a passthrough answer is never cached). */
const DROP_RESPONSE = new Set([...HOP_BY_HOP, 'cache-control', 'expires']);
/** The sidecar's own headers (`x-consent-decision-source`, …): never taken from the service. */
const OWN_PREFIX = 'x-consent-';

/** Methods passed through; any other (TRACE, TRACK, CONNECT, …) is refused before anything is sent. */
export const PASSTHROUGH_METHODS: readonly string[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];
/** {@link PASSTHROUGH_METHODS} as the `Allow` header of a 405 names them. */
export const PASSTHROUGH_ALLOW = PASSTHROUGH_METHODS.join(', ');

/** The header names a `Connection` field lists (lower case): hop-by-hop for this message. */
function connectionListed(value: string | string[] | undefined): Set<string> {
  const out = new Set<string>();
  for (const v of ([] as string[]).concat(value ?? [])) for (const name of v.split(',')) if (name.trim() !== '') out.add(name.trim().toLowerCase());
  return out;
}

/**
 * Forwards any other `/v1/*` request to the service with the API key injected and returns the
 * answer as is: never cached, never retried (some operations, such as
 * `POST /v1/redec/accesses/authorize`, record a single-use decision).
 */
export class Passthrough {
  private readonly pool: Pool;

  constructor(
    private readonly cfg: UpstreamConfig,
    private readonly timeoutMs: number,
  ) {
    this.pool = new Pool(cfg.baseUrl.origin, { connections: 16, keepAliveTimeout: 30_000, headersTimeout: 0, bodyTimeout: 0 });
  }

  /**
   * Sends `target` (the raw origin-form target the listener judged, path and query, starting with
   * `/v1/`) exactly as written, below the base URL's path.
   */
  async forward(req: IncomingMessage, res: ServerResponse, target: string, traceHeaders?: readonly string[]): Promise<void> {
    const headers: Record<string, string | string[]> = {};
    const listed = connectionListed(req.headers.connection);
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined && !DROP_REQUEST.has(name) && !listed.has(name)) headers[name] = value;
    }
    if (traceHeaders !== undefined) {
      // The W3C headers the route judged (spans on: the sidecar's call span; off: the app's own,
      // valid ones), never the app's as they came.
      delete headers.traceparent;
      delete headers.tracestate;
      for (let i = 0; i + 1 < traceHeaders.length; i += 2) headers[traceHeaders[i]!] = traceHeaders[i + 1]!;
    }
    headers.authorization = `Bearer ${this.cfg.apiKey.current()}`;
    const method = req.method ?? 'GET';
    const hasBody = method !== 'GET' && method !== 'HEAD';
    const signal = AbortSignal.timeout(this.timeoutMs);
    try {
      const upstream = await this.pool.request({
        method: method as 'GET',
        path: joinPath(this.cfg.baseUrl, target),
        headers,
        body: hasBody ? req : null,
        signal,
      });
      const out: Record<string, string | string[]> = {};
      const back = connectionListed(upstream.headers.connection);
      for (const [name, value] of Object.entries(upstream.headers)) {
        if (value !== undefined && !DROP_RESPONSE.has(name) && !back.has(name) && !name.startsWith(OWN_PREFIX)) out[name] = value;
      }
      // Whatever the service said: an answer through the sidecar is never stored by anyone
      // (some, like a single-use authorize, must never be replayed from a cache).
      out['cache-control'] = 'no-store';
      res.writeHead(upstream.statusCode, out);
      for await (const chunk of upstream.body) res.write(chunk);
      res.end();
    } catch (err) {
      if (res.headersSent) {
        res.destroy(err as Error);
        return;
      }
      const timedOut = signal.aborted;
      const body = JSON.stringify({ error: timedOut ? 'upstream_timeout' : 'upstream_unreachable' });
      res.writeHead(timedOut ? 504 : 502, { 'content-type': 'application/json', 'cache-control': 'no-store', 'x-consent-decision-source': 'fail-closed' });
      res.end(body);
    }
  }

  async close(): Promise<void> {
    await this.pool.close();
  }

  /** Aborts whatever is still in flight and closes every connection (shutdown past its budget). */
  async destroy(): Promise<void> {
    await this.pool.destroy();
  }
}
