import type { NextFunction, Request, Response } from 'express';
import { METHOD_NOT_ALLOWED_ANSWER, rejectedAnswer, type Passthrough } from '../decision/index.js';
import type { CheckRoute } from './check-route.js';
import { SOURCE_HEADER } from './check-route.js';
import { canonicalPath, CHECK_PATH, judgeTarget } from './request-target.js';
import type { RequestTrace, UpstreamCallTrace } from '../lib/trace.js';
import { passedOn, rawTraceContext } from '../observability/trace-context.js';
import { Tracing } from '../observability/tracing.js';

/**
 * Every other target on the decision listener: spellings of the check path go to the strict check
 * route, `/v1/*` passes through to the service with the API key, a target that cannot be judged
 * safely is refused, the rest is a 404.
 */
export function passthroughRoute(passthrough: Passthrough, route: CheckRoute, tracing: Tracing = Tracing.OFF): (req: Request, res: Response, next: NextFunction) => void {
  return (req, res, next) => {
    // The raw target as it arrived: what is judged is exactly what would be sent.
    const target = req.originalUrl;
    // Spelling variants of the check path (query, trailing or doubled slashes, case, escapes)
    // are answered by the strict route, which asks the service on CHECK_PATH itself.
    if (canonicalPath(target) === CHECK_PATH) {
      if (req.method === 'POST') route.check(req, res);
      else {
        res.setHeader('allow', 'POST');
        route.send(res, METHOD_NOT_ALLOWED_ANSWER);
      }
      return;
    }
    const verdict = judgeTarget(target);
    if (verdict.kind === 'refused') {
      // Never sent (issue 20): the key is for /v1/ alone, and a path a server could resolve
      // differently from us, or another spelling of the check path, is not judged by guessing.
      route.send(res, rejectedAnswer({ field: 'path', problem: verdict.problem, detail: verdict.detail }));
      req.resume();
      return;
    }
    if (verdict.kind === 'passthrough') {
      // The service's own answer (the passthrough marks its 502/504 fail-closed).
      res.setHeader(SOURCE_HEADER, 'upstream');
      const tc = rawTraceContext(req.rawHeaders);
      if (!tracing.on) {
        // Off: the app's trace context goes on as it came, or not at all when it is malformed.
        passthrough.forward(req, res, target, passedOn(tc.traceparent, tc.tracestate)).catch(next);
        return;
      }
      const trace = tracing.request('passthrough', req.method, '/v1/*', tc.traceparent, tc.tracestate)!;
      const call = trace.upstreamCall();
      res.once('close', () => endPassthroughSpans(res, call, trace));
      passthrough.forward(req, res, target, call.headers).catch(next);
      return;
    }
    res.status(404).json({ error: 'not_found', detail: `no route for ${req.method} ${canonicalPath(target) ?? target}` });
  };
}

/**
 * A passthrough's spans, from its answer: the service's own status (5xx: http_5xx), or the
 * passthrough's own 502/504 when the service could not be reached in time, marked fail-closed on
 * the source header (network_error or timeout, as the check's calls are labelled).
 */
function endPassthroughSpans(res: Response, call: UpstreamCallTrace, trace: RequestTrace): void {
  const source = String(res.getHeader(SOURCE_HEADER) ?? 'upstream');
  const status = res.statusCode;
  if (source === 'fail-closed') {
    call.end(status === 504 ? 'timeout' : 'network_error');
    trace.end({ status, decision: 'none', source, cause: status === 504 ? 'upstream_timeout' : 'upstream_unreachable' });
    return;
  }
  call.end(status < 500 ? 'ok' : 'http_5xx');
  trace.end({ status, decision: 'none', source });
}
