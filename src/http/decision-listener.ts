import { createServer, STATUS_CODES, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import express from 'express';
import type { Logger } from 'pino';
import { rejectedAnswer, type AllowCache, type DecisionLog, type DecisionMetrics, type DecisionService, type Passthrough } from '../decision/index.js';
import type { RevocationPublisher } from '../lib/revocation-hook.js';
import { RateLimiter } from '../observability/index.js';
import { Tracing } from '../observability/tracing.js';
import { cacheAdminRoute } from './cache-admin-route.js';
import { createCheckRoute, SOURCE_HEADER } from './check-route.js';
import { createForwardAuth, isForwardAuthTarget } from './forward-auth.js';
import { passthroughRoute } from './passthrough-route.js';
import { CHECK_PATH } from './request-target.js';

export { CHECK_PATH } from './request-target.js';
export { SOURCE_HEADER } from './check-route.js';

export interface DecisionListenerOptions {
  readonly service: DecisionService;
  readonly cache: AllowCache;
  readonly metrics: DecisionMetrics;
  readonly passthrough: Passthrough;
  readonly logger: Logger;
  /** Where a purge by hand goes: this replica's cache, and with Redis every replica's. */
  readonly revocations: RevocationPublisher;
  /** Lower-case header carrying the user reference on `/sidecar/forward-auth` (default `x-user-reference`). */
  readonly forwardAuthUserHeader?: string;
  readonly maxRequestBytes: number;
  /** The optional decision log (`--decision-log`). */
  readonly decisionLog?: Pick<DecisionLog, 'record'> | null;
  /** OpenTelemetry spans, or (off, the default) the app's `traceparent` passed on as it came. */
  readonly tracing?: Tracing;
}

/**
 * `127.0.0.1:7700`, the app's listener: a router over its routes. `POST /v1/authorization/check`
 * and forward-auth take lean routes on bare node:http (the hot path must not pay for machinery it
 * does not use); the cache purge and everything else go through express.
 */
export function createDecisionListener(o: DecisionListenerOptions): Server {
  const failLog = new RateLimiter(1000);
  const decisionLog = o.decisionLog ?? null;
  const tracing = o.tracing ?? Tracing.OFF;
  const route = createCheckRoute({ service: o.service, metrics: o.metrics, logger: o.logger, failLog, maxRequestBytes: o.maxRequestBytes, decisionLog, tracing });
  // Bound once: the request handler below reaches the hot path through a local, as before the split.
  const { check, send } = route;
  // Forward-auth is routed on the raw target, before express, like the check: a proxy asks per request.
  const forwardAuth = createForwardAuth({
    service: o.service,
    metrics: o.metrics,
    userHeader: o.forwardAuthUserHeader ?? 'x-user-reference',
    logger: o.logger,
    failLog,
    decisionLog,
    tracing,
  });

  const app = express();
  app.disable('x-powered-by');
  // Every answer says where it came from, as docs/decision-api.md promises: anything the sidecar answers
  // itself without a decision (404, 400, the cache purge) is `rejected` unless a route says otherwise.
  app.use((_req, res, next) => {
    res.setHeader(SOURCE_HEADER, 'rejected');
    next();
  });
  app.delete('/sidecar/cache', cacheAdminRoute({ cache: o.cache, revocations: o.revocations, metrics: o.metrics, logger: o.logger }));
  app.use(passthroughRoute(o.passthrough, route, tracing));

  const notOriginForm = rejectedAnswer({ field: 'path', detail: 'only an origin-form target (/v1/...) is accepted' });
  const server = createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
    if (req.url === CHECK_PATH && req.method === 'POST') check(req, res);
    else if (isForwardAuthTarget(req.url)) forwardAuth(req, res);
    // An absolute-form target (`GET http://evil.example/v1/x`) or `*` would reach the service with
    // our API key added: only origin-form passes, before any route sees it.
    else if (!req.url?.startsWith('/')) {
      send(res, notOriginForm);
      req.resume();
    } else app(req, res);
  });
  server.on('clientError', answerClientError);
  return server;
}

/**
 * What node's parser refuses before any route sees it (a literal control character, space or
 * non-ASCII byte in the target, a malformed request line) is answered like every other refusal of
 * this listener: 400 JSON, `rejected` (node's default is a bare 400 without a body).
 */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  // As node's own handler: never write into a response already under way on this connection.
  const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
  if (err.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
    socket.destroy();
    return;
  }
  const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
  const invalidUrl = err.code === 'HPE_INVALID_URL';
  const body = JSON.stringify({
    decision: 'DENY',
    error: 'invalid_request',
    field: invalidUrl ? 'path' : 'request',
    ...(invalidUrl ? { problem: 'invalid_character' } : {}),
    detail: invalidUrl ? 'the target holds a literal control character, space or non-ASCII byte' : `malformed HTTP request (${err.code ?? 'parse error'})`,
  });
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
      `cache-control: no-store\r\n${SOURCE_HEADER}: rejected\r\nconnection: close\r\n\r\n${body}`,
  );
}
