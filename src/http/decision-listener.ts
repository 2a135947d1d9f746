import { createServer, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import express from 'express';
import type { Logger } from 'pino';
import {
  isInvalidRequest,
  METHOD_NOT_ALLOWED_ANSWER,
  parseCheckRequest,
  rejectedAnswer,
  type AllowCache,
  type Answer,
  type DecisionLog,
  type DecisionMetrics,
  type DecisionService,
  type Passthrough,
} from '../decision/index.js';
import { RateLimiter } from '../observability/index.js';
import { failClosedAnswerFor, lastResort } from './fail-closed.js';
import { createForwardAuth, isForwardAuthTarget } from './forward-auth.js';
import { canonicalPath, CHECK_PATH, judgeTarget } from './request-target.js';

export { CHECK_PATH } from './request-target.js';

const LAST_RESORT_BODY = Buffer.from(JSON.stringify({ decision: 'DENY', error: 'internal_error' }));
export const SOURCE_HEADER = 'x-consent-decision-source';
/** A `no-cache` directive in one Cache-Control field value (several fields: any of them). */
const NO_CACHE = /(?:^|,)\s*no-cache\s*(?:,|$)/i;

export interface DecisionListenerOptions {
  readonly service: DecisionService;
  readonly cache: AllowCache;
  readonly metrics: DecisionMetrics;
  readonly passthrough: Passthrough;
  readonly logger: Logger;
  /** Lower-case header carrying the user reference on `/sidecar/forward-auth` (default `x-user-reference`). */
  readonly forwardAuthUserHeader?: string;
  readonly maxRequestBytes: number;
  /** The optional decision log (`--decision-log`). */
  readonly decisionLog?: Pick<DecisionLog, 'record'> | null;
}

/**
 * `127.0.0.1:7700`, the app's listener. `POST /v1/authorization/check` takes a lean route on bare
 * node:http (the hot path must not pay for machinery it does not use); everything else goes
 * through express. This is the one boundary where errors, known or not, become a 503 DENY.
 */
export function createDecisionListener(o: DecisionListenerOptions): Server {
  const failLog = new RateLimiter(1000);

  /** `t0`: performance.now() when the request arrived, for the decision duration. */
  const send = (res: ServerResponse, a: Answer, close = false, t0?: number): void => {
    o.metrics.answered(a);
    if (t0 !== undefined) o.metrics.answeredIn(a, (performance.now() - t0) / 1000);
    if (res.headersSent || res.destroyed) return;
    const headers = [
      'content-type', 'application/json',
      'content-length', String(a.bodyBytes),
      'cache-control', 'no-store',
      SOURCE_HEADER, a.source,
    ];
    if (close) headers.push('connection', 'close');
    res.writeHead(a.status, headers);
    res.end(a.body);
  };

  const answerFor = failClosedAnswerFor({ metrics: o.metrics, logger: o.logger, failLog, route: 'check' });
  const failClosed = (res: ServerResponse, err: unknown, t0?: number): Answer => {
    const answer = answerFor(err);
    send(res, answer, false, t0);
    return answer;
  };

  const log = o.decisionLog ?? null;
  const decide = (res: ServerResponse, body: string, noCache: boolean, t0: number): void => {
    try {
      const req = parseCheckRequest(body);
      if (isInvalidRequest(req)) return send(res, rejectedAnswer(req), false, t0);
      if (!noCache) {
        const hit = o.service.cached(req);
        if (hit) {
          send(res, hit, false, t0);
          log?.record(req, hit);
          return;
        }
      }
      // One `then`, its handlers guarding themselves (no promise per fallback): if sending
      // fails (metrics, headers), fail closed; and if that fails too, the last resort.
      // Without no-cache the cache was just read above: decide() does not read it again.
      o.service.decide(req, noCache, !noCache).then(
        (a) => {
          try {
            send(res, a, false, t0);
            log?.record(req, a);
          } catch (err) {
            failClosedOrLastResort(res, err, t0);
          }
        },
        (err: unknown) => {
          try {
            const a = failClosed(res, err, t0);
            log?.record(req, a);
          } catch (again) {
            lastResortAnswer(res, again);
          }
        },
      );
    } catch (err) {
      failClosedOrLastResort(res, err, t0);
    }
  };

  const failClosedOrLastResort = (res: ServerResponse, err: unknown, t0: number): void => {
    try {
      failClosed(res, err, t0);
    } catch (again) {
      lastResortAnswer(res, again);
    }
  };

  const LAST_RESORT = {
    logger: o.logger,
    route: 'check' as const,
    headers: { 'content-type': 'application/json', 'content-length': LAST_RESORT_BODY.length, 'cache-control': 'no-store', [SOURCE_HEADER]: 'fail-closed' },
    body: LAST_RESORT_BODY,
  };
  const lastResortAnswer = (res: ServerResponse, err: unknown): void => lastResort(res, err, LAST_RESORT);

  const max = o.maxRequestBytes;
  const oversize = rejectedAnswer({ field: 'body', detail: `body larger than ${max} bytes` });

  const check = (req: IncomingMessage, res: ServerResponse): void => {
    const t0 = performance.now();
    // The raw header list, not `req.headers`, which node builds lazily on first read: a hit
    // pays for no object it does not use.
    const raw = req.rawHeaders;
    let declared = 0;
    let noCache = false;
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i]!;
      if (name.length === 14 && name.toLowerCase() === 'content-length') declared = Number(raw[i + 1]);
      else if (name.length === 13 && name.toLowerCase() === 'cache-control' && NO_CACHE.test(raw[i + 1]!)) noCache = true;
    }
    if (declared > max) {
      send(res, oversize, true, t0);
      req.resume();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > max) {
        if (!res.headersSent) send(res, oversize, true, t0);
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (size > max) return;
      decide(res, (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)).toString('utf8'), noCache, t0);
    });
    req.on('error', () => undefined);
  };

  // Forward-auth is routed on the raw target, before express, like the check: a proxy asks per request.
  const forwardAuth = createForwardAuth({
    service: o.service,
    metrics: o.metrics,
    userHeader: o.forwardAuthUserHeader ?? 'x-user-reference',
    logger: o.logger,
    failLog,
    decisionLog: o.decisionLog ?? null,
  });

  const app = express();
  app.disable('x-powered-by');
  // Every answer says where it came from, as the README promises: anything the sidecar answers
  // itself without a decision (404, 400, the cache purge) is `rejected` unless a route says otherwise.
  app.use((_req, res, next) => {
    res.setHeader(SOURCE_HEADER, 'rejected');
    next();
  });
  app.delete('/sidecar/cache', (req, res) => {
    const user = req.query.userReference;
    if (user !== undefined && (typeof user !== 'string' || user === '')) {
      res.status(400).json({ error: 'invalid_request', field: 'userReference', detail: 'userReference must be one non-empty string' });
      return;
    }
    const purged = typeof user === 'string' ? o.cache.revokeUser(user) : o.cache.revokeAll();
    o.metrics.purged.labels('manual').inc(purged);
    o.logger.info({ event: 'cache_purged', trigger: 'manual', scope: typeof user === 'string' ? 'user' : 'all', purged });
    res.json({ purged });
  });
  app.use((req, res, next) => {
    // The raw target as it arrived: what is judged is exactly what would be sent.
    const target = req.originalUrl;
    // Spelling variants of the check path (query, trailing or doubled slashes, case, escapes)
    // are answered by the strict route, which asks the service on CHECK_PATH itself.
    if (canonicalPath(target) === CHECK_PATH) {
      if (req.method === 'POST') check(req, res);
      else {
        res.setHeader('allow', 'POST');
        send(res, METHOD_NOT_ALLOWED_ANSWER);
      }
      return;
    }
    const verdict = judgeTarget(target);
    if (verdict.kind === 'refused') {
      // Never sent (issue 20): the key is for /v1/ alone, and a path a server could resolve
      // differently from us, or another spelling of the check path, is not judged by guessing.
      send(res, rejectedAnswer({ field: 'path', problem: verdict.problem, detail: verdict.detail }));
      req.resume();
      return;
    }
    if (verdict.kind === 'passthrough') {
      // The service's own answer (the passthrough marks its 502/504 fail-closed).
      res.setHeader(SOURCE_HEADER, 'upstream');
      o.passthrough.forward(req, res, target).catch(next);
      return;
    }
    res.status(404).json({ error: 'not_found', detail: `no route for ${req.method} ${canonicalPath(target) ?? target}` });
  });

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
