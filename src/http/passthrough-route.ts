import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../observability/logger.js';
import { METHOD_NOT_ALLOWED_ANSWER, methodNotAllowedAnswer, PASSTHROUGH_ALLOW, PASSTHROUGH_METHODS, rejectedAnswer, type Passthrough } from '../decision/index.js';
import type { RequestTrace, UpstreamCallTrace } from '../lib/trace.js';
import { passedOn, rawTraceContext } from '../observability/trace-context.js';
import { Tracing } from '../observability/tracing.js';
import { DECISION_SOURCE_HEADER } from '../edge/decision-headers.js';
import type { RouteBoundary } from '../edge/decision-boundary.js';
import { canonicalPath, CHECK_PATH, judgeTarget } from './request-target.js';

export interface PassthroughRouteOptions {
  readonly passthrough: Passthrough;
  /** The strict check route, for every spelling of the check path. */
  readonly check: (req: IncomingMessage, res: ServerResponse) => void;
  /** The check route's answers: refusals here are the check route's own (counted as such). */
  readonly answers: RouteBoundary<ServerResponse>;
  readonly logger: Logger;
  readonly tracing?: Tracing;
}

const PASSTHROUGH_METHOD_REFUSED = methodNotAllowedAnswer(`only ${PASSTHROUGH_ALLOW} are passed through to the service`);

/** The body of a passthrough the sidecar could not complete: never the service's, never a decision. */
const PASSTHROUGH_FAILED = JSON.stringify({ error: 'upstream_unreachable' });

/**
 * Every other target on the decision listener: spellings of the check path go to the strict check
 * route, `/v1/*` passes through to the service with the API key, a target that cannot be judged
 * safely is refused, the rest is a 404.
 */
export function passthroughRoute(o: PassthroughRouteOptions): (req: IncomingMessage, res: ServerResponse) => void {
  const { passthrough, answers } = o;
  const tracing = o.tracing ?? Tracing.OFF;
  /** An exception of our own (not the service's failure, which `forward` answers): 502, fail-closed, logged. */
  const failed = (res: ServerResponse, err: unknown): void => {
    o.logger.error({ event: 'passthrough_failed', err }, 'passthrough failed');
    if (res.headersSent) res.destroy();
    else res.writeHead(502, ['content-type', 'application/json', 'cache-control', 'no-store', DECISION_SOURCE_HEADER, 'fail-closed']).end(PASSTHROUGH_FAILED);
  };
  return (req, res) => {
    // The raw target as it arrived: what is judged is exactly what would be sent.
    const target = req.url!;
    const t0 = performance.now();
    // Spelling variants of the check path (query, trailing or doubled slashes, case, escapes)
    // are answered by the strict route, which asks the service on CHECK_PATH itself.
    if (canonicalPath(target) === CHECK_PATH) {
      if (req.method === 'POST') return o.check(req, res);
      res.setHeader('allow', 'POST');
      req.resume();
      return answers.answer(res, METHOD_NOT_ALLOWED_ANSWER, t0, undefined, null);
    }
    const verdict = judgeTarget(target);
    if (verdict.kind === 'refused') {
      // Never sent: the key is for /v1/ alone, and a path a server could resolve differently
      // from us, or another spelling of the check path, is not judged by guessing.
      req.resume();
      return answers.answer(res, rejectedAnswer({ field: 'path', problem: verdict.problem, detail: verdict.detail }), t0, undefined, null);
    }
    if (verdict.kind !== 'passthrough') {
      req.resume();
      const body = JSON.stringify({ error: 'not_found', detail: `no route for ${req.method} ${canonicalPath(target) ?? target}` });
      res.writeHead(404, ['content-type', 'application/json', 'content-length', String(Buffer.byteLength(body)), 'cache-control', 'no-store', DECISION_SOURCE_HEADER, 'rejected']);
      res.end(body);
      return;
    }
    // TRACE would echo the key back to the caller (RFC 9110 forbids credentials on it), CONNECT
    // and friends are not requests for the service: only the methods it could mean are sent.
    if (!PASSTHROUGH_METHODS.includes(req.method ?? '')) {
      req.resume();
      res.setHeader('allow', PASSTHROUGH_ALLOW);
      return answers.answer(res, PASSTHROUGH_METHOD_REFUSED, t0, undefined, null);
    }
    // The service's own answer (the passthrough marks its 502/504 fail-closed).
    res.setHeader(DECISION_SOURCE_HEADER, 'upstream');
    const tc = rawTraceContext(req.rawHeaders);
    try {
      if (!tracing.on) {
        // Off: the app's trace context goes on as it came, or not at all when it is malformed.
        passthrough.forward(req, res, target, passedOn(tc.traceparent, tc.tracestate)).catch((err: unknown) => failed(res, err));
        return;
      }
      const trace = tracing.request('passthrough', req.method ?? 'GET', '/v1/*', tc.traceparent, tc.tracestate)!;
      const call = trace.upstreamCall();
      res.once('close', () => endPassthroughSpans(res, call, trace));
      passthrough.forward(req, res, target, call.headers).catch((err: unknown) => failed(res, err));
    } catch (err) {
      failed(res, err);
    }
  };
}

/**
 * A passthrough's spans, from its answer: the service's own status (5xx: http_5xx), or the
 * passthrough's own 502/504 when the service could not be reached in time, marked fail-closed on
 * the source header (network_error or timeout, as the check's calls are labelled).
 */
function endPassthroughSpans(res: ServerResponse, call: UpstreamCallTrace, trace: RequestTrace): void {
  const source = String(res.getHeader(DECISION_SOURCE_HEADER) ?? 'upstream');
  const status = res.statusCode;
  if (source === 'fail-closed') {
    call.end(status === 504 ? 'timeout' : 'network_error');
    trace.end({ status, decision: 'none', source, cause: status === 504 ? 'upstream_timeout' : 'upstream_unreachable' });
    return;
  }
  call.end(status < 500 ? 'ok' : 'http_5xx');
  trace.end({ status, decision: 'none', source });
}
