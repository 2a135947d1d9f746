import { Pool, errors as undiciErrors } from 'undici';
import type { UpstreamConfig } from '../config/index.js';
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

/**
 * The keep-alive client for authorization checks. One deadline covers everything: connecting,
 * the headers and the whole body, so a service that trickles its body cannot hold a check past
 * it. At most one retry, only when the connection failed before any response and only inside
 * the same deadline (the check is stateless, so a repeat is safe).
 */
export class UpstreamClient {
  private readonly pool: Pool;
  private readonly checkPath: string;
  private readonly userAgent: string;

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

  /** Sends one check; throws {@link DecisionError} `ERR_UPSTREAM_TIMEOUT` or `ERR_UPSTREAM_NETWORK`. */
  async check(body: string): Promise<CheckCallResult> {
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, this.cfg.timeoutMs);
    try {
      for (let attempt = 1; ; attempt++) {
        let headersReceived = false;
        try {
          const res = await this.pool.request({
            method: 'POST',
            path: this.checkPath,
            headers: {
              authorization: `Bearer ${this.cfg.apiKey.current()}`,
              'content-type': 'application/json',
              accept: 'application/json',
              'user-agent': this.userAgent,
            },
            body,
            signal: controller.signal,
          });
          headersReceived = true;
          const text = await readLimited(res.body, MAX_UPSTREAM_BODY_BYTES);
          return { status: res.statusCode, date: latestDate(res.headers.date), body: text, attempts: attempt };
        } catch (err) {
          if (timedOut) throw new DecisionError('ERR_UPSTREAM_TIMEOUT', `no answer within ${this.cfg.timeoutMs} ms`, { cause: err });
          if (err instanceof DecisionError) throw err;
          if (!headersReceived && attempt === 1 && isRetryable(err)) continue;
          throw new DecisionError('ERR_UPSTREAM_NETWORK', `service unreachable: ${codeOf(err)}`, { cause: err });
        }
      }
    } finally {
      clearTimeout(timer);
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

async function readLimited(body: AsyncIterable<Buffer> & { destroy(err?: Error): unknown }, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > limit) {
      body.destroy();
      throw new DecisionError('ERR_UPSTREAM_MALFORMED', `body larger than ${limit} bytes`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size).toString('utf8');
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
