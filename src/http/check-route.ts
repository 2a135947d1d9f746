import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { isInvalidRequest, parseCheckBody, rejectedAnswer, type Answer, type DecisionService } from '../decision/index.js';
import type { Tracing } from '../observability/tracing.js';
import type { DecisionBoundary, RouteBoundary } from '../edge/decision-boundary.js';
import { DECISION_ID_HEADER, DECISION_SOURCE_HEADER } from '../edge/decision-headers.js';
import { CHECK_PATH } from './request-target.js';

/** A `no-cache` directive in one Cache-Control field value (several fields: any of them). */
const NO_CACHE = /(?:^|,)\s*no-cache\s*(?:,|$)/i;

const LAST_RESORT_BODY = Buffer.from(JSON.stringify({ decision: 'DENY', error: 'internal_error' }));
const LAST_RESORT_HEADERS = {
  'content-type': 'application/json',
  'content-length': LAST_RESORT_BODY.length,
  'cache-control': 'no-store',
  [DECISION_SOURCE_HEADER]: 'fail-closed',
};

/** Writes a JSON answer of the decision listener with its source and decision id. */
export function writeJsonAnswer(res: ServerResponse, a: Answer, decisionId: string): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(a.status, [
    'content-type', 'application/json',
    'content-length', String(a.bodyBytes),
    'cache-control', 'no-store',
    DECISION_SOURCE_HEADER, a.source,
    DECISION_ID_HEADER, decisionId,
  ]);
  res.end(a.body);
}

/** A fixed 503 with nothing that could throw again; the connection cut if even that cannot be written. */
export function jsonLastResort(res: ServerResponse): void {
  try {
    if (res.headersSent) res.destroy();
    else res.writeHead(503, LAST_RESORT_HEADERS).end(LAST_RESORT_BODY);
  } catch {
    res.destroy();
  }
}

/** The check route's answers: JSON, through the decision boundary (counted once, with an id). */
export function checkBoundary(boundary: DecisionBoundary): RouteBoundary<ServerResponse> {
  return boundary.route('check', writeJsonAnswer, jsonLastResort);
}

export interface CheckRouteOptions {
  readonly service: DecisionService;
  readonly answers: RouteBoundary<ServerResponse>;
  readonly maxRequestBytes: number;
  /** Spans, or only the app's `traceparent` passed on to the service (off). */
  readonly tracing: Tracing;
}

/**
 * `POST /v1/authorization/check`, the hot path on bare node:http: reads the body with no
 * per-request machinery it does not use, answers a hit from the cache at once, and decides the
 * rest. Every outcome, an exception included, is answered by the decision boundary.
 */
export function createCheckRoute(o: CheckRouteOptions): (req: IncomingMessage, res: ServerResponse) => void {
  const { service, answers, tracing } = o;
  const max = o.maxRequestBytes;
  const oversize = rejectedAnswer({ field: 'body', detail: `body larger than ${max} bytes` });

  const decide = (res: ServerResponse, body: Buffer, noCache: boolean, t0: number, trace: ReturnType<Tracing['request']>): void => {
    try {
      const req = parseCheckBody(body);
      if (isInvalidRequest(req)) return answers.answer(res, rejectedAnswer(req), t0, undefined, trace);
      if (!noCache) {
        const hit = service.cached(req);
        if (hit) return answers.answer(res, hit, t0, req, trace);
      }
      // Without no-cache the cache was just read above: the service does not read it again.
      answers.settle(res, service.decide(req, { noCache, cacheMissed: !noCache, trace, arrivedAt: t0 }), t0, req, trace);
    } catch (err) {
      answers.fail(res, err, t0, undefined, trace);
    }
  };

  return (req, res) => {
    const t0 = performance.now();
    // The raw header list, not `req.headers`, which node builds lazily on first read: a hit
    // pays for no object it does not use.
    const raw = req.rawHeaders;
    let declared = 0;
    let noCache = false;
    let traceparent: string | undefined;
    let tracestate: string | undefined;
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i]!;
      if (name.length === 14 && name.toLowerCase() === 'content-length') declared = Number(raw[i + 1]);
      else if (name.length === 13 && name.toLowerCase() === 'cache-control' && NO_CACHE.test(raw[i + 1]!)) noCache = true;
      // W3C trace context, read as rawTraceContext() does (one pass here, on the hot path): a
      // repeated traceparent is none (''), several tracestate fields are one list.
      else if (name.length === 11 && name.toLowerCase() === 'traceparent') traceparent = traceparent === undefined ? raw[i + 1] : '';
      else if (name.length === 10 && name.toLowerCase() === 'tracestate') tracestate = tracestate === undefined ? raw[i + 1] : `${tracestate},${raw[i + 1]}`;
    }
    // Off and no traceparent (the common case): nothing is made.
    const trace = traceparent === undefined && !tracing.on ? null : tracing.request('check', 'POST', CHECK_PATH, traceparent, tracestate);
    if (declared > max) {
      res.shouldKeepAlive = false;
      answers.answer(res, oversize, t0, undefined, trace);
      req.resume();
      return;
    }
    // No 'error' listener: node emits no error on a request that has none (an aborted request is
    // destroyed quietly, and nobody is left to answer).
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      const before = size;
      size += chunk.length;
      if (size > max) {
        // Refused once, on the chunk that crossed the limit; the rest flows to nowhere.
        if (before <= max) {
          chunks.length = 0;
          res.shouldKeepAlive = false;
          answers.answer(res, oversize, t0, undefined, trace);
        }
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (size > max) return;
      decide(res, chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size), noCache, t0, trace);
    });
  };
}
