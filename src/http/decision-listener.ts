import type { Server } from 'node:http';
import { createServer, STATUS_CODES } from '../lib/node-http.js';
import type { Duplex } from 'node:stream';
import type { Logger } from '../observability/logger.js';
import { methodNotAllowedAnswer, PASSTHROUGH_ALLOW, rejectedAnswer, type AllowCache, type Answer, type DecisionLog, type DecisionMetrics, type DecisionService, type Passthrough } from '../decision/index.js';
import type { RevocationPublisher } from '../lib/revocation-hook.js';
import { Tracing } from '../observability/tracing.js';
import { BATCH_PATH, createBatchRoute } from './batch-route.js';
import { cacheAdminRoute } from './cache-admin-route.js';
import { DecisionBoundary } from '../edge/decision-boundary.js';
import { DECISION_ID_HEADER, DECISION_SOURCE_HEADER } from '../edge/decision-headers.js';
import { checkBoundary, createCheckRoute } from './check-route.js';
import { createForwardAuth, FORWARD_AUTH_PATH, forwardAuthBoundary } from './forward-auth.js';
import { passthroughRoute } from './passthrough-route.js';
import { hostChecked, hostGuard } from './host-check.js';
import { CHECK_PATH } from './request-target.js';
import { routeTable, type Handler } from './route-table.js';
import { TIMEOUT_CHECK_INTERVAL_MS } from './listener-bounds.js';

export { CHECK_PATH } from './request-target.js';

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
  /** The whole deadline of one check, and of one batch (`--upstream-timeout-ms`). */
  readonly upstreamTimeoutMs: number;
  /** The optional decision log (`--decision-log`). */
  readonly decisionLog?: Pick<DecisionLog, 'record'> | null;
  /** OpenTelemetry spans, or (off, the default) the app's `traceparent` passed on as it came. */
  readonly tracing?: Tracing;
  /** The decision routes' fail-closed boundary; one of its own by default. */
  readonly boundary?: DecisionBoundary;
  /** `Host` names accepted beside the loopback ones (`--allowed-host`). */
  readonly allowedHosts?: readonly string[];
  /** The listener is a Unix socket (`--listen unix:/path`): no name resolves to it, every `Host` is served. */
  readonly unixSocket?: boolean;
}

/**
 * `127.0.0.1:7700`, the app's listener: one route table on bare node:http. Every decision route
 * (check, batch, forward-auth) answers through one fail-closed boundary; the cache purge and the
 * passthrough are routes of their own.
 */
export function createDecisionListener(o: DecisionListenerOptions): Server {
  const tracing = o.tracing ?? Tracing.OFF;
  const boundary = o.boundary ?? new DecisionBoundary({ metrics: o.metrics, logger: o.logger, decisionLog: o.decisionLog ?? null });
  const checkAnswers = checkBoundary(boundary);
  const check = createCheckRoute({ service: o.service, answers: checkAnswers, maxRequestBytes: o.maxRequestBytes, tracing });
  const rest = passthroughRoute({ passthrough: o.passthrough, check, answers: checkAnswers, logger: o.logger, tracing });
  const notOriginForm = rejectedAnswer({ field: 'path', detail: 'only an origin-form target (/v1/...) is accepted' });
  // Every route but forward-auth, whose proxy passes the original request's Host on.
  const allowed = hostGuard(o.allowedHosts ?? [], o.unixSocket ?? false);
  const guarded = (h: Handler): Handler => hostChecked(h, allowed, checkAnswers);
  const guardedRest = guarded(rest);

  const dispatch = routeTable(
    [
      // The hot path first: one string comparison.
      { path: CHECK_PATH, methods: ['POST'], handle: guarded(check), methodNotAllowed: guardedRest },
      {
        path: FORWARD_AUTH_PATH,
        match: 'subtree',
        methods: '*',
        handle: createForwardAuth({ service: o.service, answers: forwardAuthBoundary(boundary), userHeader: o.forwardAuthUserHeader ?? 'x-user-reference', tracing }),
      },
      { path: BATCH_PATH, match: 'path', methods: ['POST'], handle: guarded(createBatchRoute({ service: o.service, boundary, timeoutMs: o.upstreamTimeoutMs, tracing })), methodNotAllowed: methodNotAllowed('POST') },
      { path: '/sidecar/cache', match: 'path', methods: ['DELETE'], handle: guarded(cacheAdminRoute({ cache: o.cache, revocations: o.revocations, metrics: o.metrics, logger: o.logger })), methodNotAllowed: methodNotAllowed('DELETE') },
    ],
    (req, res) => {
      // An absolute-form target (`GET http://evil.example/v1/x`) or `*` would reach the service
      // with our API key added: only origin-form passes, before anything else is judged.
      if (!req.url?.startsWith('/')) {
        req.resume();
        return checkAnswers.answer(res, notOriginForm, performance.now(), undefined, null);
      }
      guardedRest(req, res);
    },
  );
  const server = createServer({ keepAliveTimeout: 65_000, connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS }, dispatch);
  // What never reached a route is answered on the raw socket, still through the boundary: counted
  // (`route="check"`, `rejected`, as every refusal of this listener) and given its decision id.
  const rawAnswers = boundary.route('check', writeRawAnswer, (socket: Duplex) => socket.destroy());
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    const a = clientErrorAnswer(err, socket);
    if (a === null) socket.destroy();
    else rawAnswers.answer(socket, a, performance.now(), undefined, null);
  });
  // CONNECT is no request for the service: refused like any method the passthrough does not take.
  server.on('connect', (_req: unknown, socket: Duplex) => rawAnswers.answer(socket, CONNECT_REFUSED, performance.now(), undefined, null));
  return server;
}

const CONNECT_REFUSED = methodNotAllowedAnswer('CONNECT is not served');

/** An answer written whole on a socket no response object owns, then the connection closed. */
function writeRawAnswer(socket: Duplex, a: Answer, decisionId: string): void {
  socket.end(
    `HTTP/1.1 ${a.status} ${STATUS_CODES[a.status]}\r\n${a.status === 405 ? `allow: ${PASSTHROUGH_ALLOW}\r\n` : ''}` +
      `content-type: application/json\r\ncontent-length: ${a.bodyBytes}\r\ncache-control: no-store\r\n` +
      `${DECISION_SOURCE_HEADER}: ${a.source}\r\n${DECISION_ID_HEADER}: ${decisionId}\r\nconnection: close\r\n\r\n${a.body}`,
  );
}

/** 405 for a sidecar route asked with another method, naming the one it takes. */
function methodNotAllowed(allow: string): Handler {
  const body = JSON.stringify({ error: 'method_not_allowed', detail: `${allow} only` });
  return (req, res) => {
    req.resume();
    res.writeHead(405, ['allow', allow, 'content-type', 'application/json', 'content-length', String(Buffer.byteLength(body)), 'cache-control', 'no-store', DECISION_SOURCE_HEADER, 'rejected']).end(body);
  };
}

/**
 * What node's parser refuses before any route sees it (a literal control character, space or
 * non-ASCII byte in the target, a malformed request line or chunk, headers too large or too slow)
 * is answered like every other refusal of this listener: JSON, `rejected` (node's default is a bare
 * 400 without a body). Null when nothing may be written: the peer is gone, or a response on this
 * connection is already under way (as node's own handler, never write into it).
 */
function clientErrorAnswer(err: NodeJS.ErrnoException, socket: Duplex): Answer | null {
  const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
  if (err.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) return null;
  const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
  if (err.code === 'HPE_INVALID_URL') {
    return rejectedAnswer({ field: 'path', problem: 'invalid_character', detail: 'the target holds a literal control character, space or non-ASCII byte' }, status);
  }
  return rejectedAnswer({ field: 'request', detail: `malformed HTTP request (${err.code ?? 'parse error'})` }, status);
}
