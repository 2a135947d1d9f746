import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { isInvalidRequest, parseCheckRequest, rejectedAnswer, type Answer, type DecisionLog, type DecisionMetrics, type DecisionService } from '../decision/index.js';
import type { RequestTrace } from '../lib/trace.js';
import type { RateLimiter } from '../observability/index.js';
import type { Tracing } from '../observability/tracing.js';
import { failClosedAnswerFor, lastResort } from './fail-closed.js';
import { CHECK_PATH } from './request-target.js';

const LAST_RESORT_BODY = Buffer.from(JSON.stringify({ decision: 'DENY', error: 'internal_error' }));
export const SOURCE_HEADER = 'x-consent-decision-source';
/** A `no-cache` directive in one Cache-Control field value (several fields: any of them). */
const NO_CACHE = /(?:^|,)\s*no-cache\s*(?:,|$)/i;

export interface CheckRouteOptions {
  readonly service: DecisionService;
  readonly metrics: DecisionMetrics;
  readonly logger: Logger;
  /** Shared with forward-auth: one rate for the listener's fail-closed log lines. */
  readonly failLog: RateLimiter;
  readonly maxRequestBytes: number;
  readonly decisionLog: Pick<DecisionLog, 'record'> | null;
  /** Spans, or only the app's `traceparent` passed on to the service (off). */
  readonly tracing: Tracing;
}

export interface CheckRoute {
  /** `POST /v1/authorization/check`: the hot path, on bare node:http. */
  check(req: IncomingMessage, res: ServerResponse): void;
  /** Writes an answer with the listener's headers and counts it; `t0` (performance.now() at arrival) times it. */
  send(res: ServerResponse, a: Answer, close?: boolean, t0?: number): void;
}

/** The listener's answer writer: counts, times (from `t0`, performance.now() at arrival) and writes. */
export function answerWriter(metrics: DecisionMetrics): CheckRoute['send'] {
  return (res, a, close = false, t0) => {
    metrics.answered(a);
    if (t0 !== undefined) metrics.answeredIn(a, (performance.now() - t0) / 1000);
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
}

/**
 * The check route: reads the body with no per-request machinery it does not use, answers a hit
 * from the cache at once, and decides the rest ({@link createDecide}).
 */
export function createCheckRoute(o: CheckRouteOptions): CheckRoute {
  const send = answerWriter(o.metrics);
  const decide = createDecide(o, send);
  const tracing = o.tracing;
  const max = o.maxRequestBytes;
  const oversize = rejectedAnswer({ field: 'body', detail: `body larger than ${max} bytes` });

  const check = (req: IncomingMessage, res: ServerResponse): void => {
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
      send(res, oversize, true, t0);
      trace?.end(oversize);
      req.resume();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > max) {
        if (!res.headersSent) {
          send(res, oversize, true, t0);
          trace?.end(oversize);
        }
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (size > max) return;
      decide(res, (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)).toString('utf8'), noCache, t0, trace);
    });
    req.on('error', () => undefined);
  };

  return { check, send };
}

/**
 * Decides one parsed body. This is the one place where an error, known or not, becomes a 503 DENY,
 * and where that fails too, a last-resort DENY written by hand.
 */
function createDecide(o: CheckRouteOptions, send: CheckRoute['send']): (res: ServerResponse, body: string, noCache: boolean, t0: number, trace: RequestTrace | null) => void {
  const answerFor = failClosedAnswerFor({ metrics: o.metrics, logger: o.logger, failLog: o.failLog, route: 'check' });
  const LAST_RESORT = {
    logger: o.logger,
    route: 'check' as const,
    headers: { 'content-type': 'application/json', 'content-length': LAST_RESORT_BODY.length, 'cache-control': 'no-store', [SOURCE_HEADER]: 'fail-closed' },
    body: LAST_RESORT_BODY,
  };
  const failClosed = (res: ServerResponse, err: unknown, t0?: number): Answer => {
    const answer = answerFor(err);
    send(res, answer, false, t0);
    return answer;
  };
  const failClosedOrLastResort = (res: ServerResponse, err: unknown, t0: number, trace: RequestTrace | null): void => {
    try {
      // Not `trace?.end(failClosed(…))`: with no trace, optional chaining would skip the answer too.
      const answer = failClosed(res, err, t0);
      trace?.end(answer);
    } catch (again) {
      lastResort(res, again, LAST_RESORT);
    }
  };
  const log = o.decisionLog;

  return (res, body, noCache, t0, trace) => {
    try {
      const req = parseCheckRequest(body);
      if (isInvalidRequest(req)) {
        const rejected = rejectedAnswer(req);
        send(res, rejected, false, t0);
        trace?.end(rejected);
        return;
      }
      if (!noCache) {
        const hit = o.service.cached(req);
        if (hit) {
          send(res, hit, false, t0);
          log?.record(req, hit);
          trace?.end(hit, req.configKey);
          return;
        }
      }
      // One `then`, its handlers guarding themselves (no promise per fallback): if sending
      // fails (metrics, headers), fail closed; and if that fails too, the last resort.
      // Without no-cache the cache was just read above: decide() does not read it again.
      o.service.decide(req, noCache, !noCache, trace).then(
        (a) => {
          try {
            send(res, a, false, t0);
            log?.record(req, a);
            trace?.end(a, req.configKey);
          } catch (err) {
            failClosedOrLastResort(res, err, t0, trace);
          }
        },
        (err: unknown) => {
          try {
            const a = failClosed(res, err, t0);
            log?.record(req, a);
            trace?.end(a, req.configKey);
          } catch (again) {
            lastResort(res, again, LAST_RESORT);
          }
        },
      );
    } catch (err) {
      failClosedOrLastResort(res, err, t0, trace);
    }
  };
}
