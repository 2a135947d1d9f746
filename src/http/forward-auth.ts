import type { IncomingMessage, ServerResponse } from 'node:http';
import { singleRaw } from '../lib/headers.js';
import { MAX_FIELD_LENGTH, rejectedAnswer, type Answer, type CheckRequest, type DecisionService, type InvalidRequest } from '../decision/index.js';
import type { DecisionBoundary, RouteBoundary } from '../edge/decision-boundary.js';
import { CONFIG_KEY_HEADER, DECISION_ERROR_HEADER, DECISION_ID_HEADER, DECISION_SOURCE_HEADER } from '../edge/decision-headers.js';
import { renderedOnce, verdictOf } from '../edge/verdict.js';
import { rawTraceContext } from '../observability/trace-context.js';
import { Tracing } from '../observability/tracing.js';

/** Forward-auth for a proxy in the pod: this path, and any path beneath it (Envoy appends the original one). */
export const FORWARD_AUTH_PATH = '/sidecar/forward-auth';

export interface ForwardAuthOptions {
  readonly service: DecisionService;
  /** The route's side of the decision boundary ({@link forwardAuthBoundary}). */
  readonly answers: RouteBoundary<ServerResponse>;
  /** Lower-case name of the header carrying the user reference (`--forward-auth-user-header`). */
  readonly userHeader: string;
  /** Spans, or only the proxy's `traceparent` passed on to the service (off). */
  readonly tracing?: Tracing;
}

/** The proxy's view of one decision, rendered once per decision answer. */
interface Rendered {
  readonly status: 200 | 400 | 403 | 503;
  readonly headers: readonly string[];
  readonly body: string;
}

const BARE_LENGTH = FORWARD_AUTH_PATH.length;

/**
 * How a decision answer reads to a proxy: its {@link verdictOf} (200 only for an ALLOW the
 * fail-closed parser accepted) as plain text, with the header that says why.
 */
const rendered = renderedOnce((a: Answer): Rendered => {
  const v = verdictOf(a);
  const body = `${v.message}\n`;
  const headers = ['content-type', 'text/plain; charset=utf-8', 'cache-control', 'no-store', DECISION_SOURCE_HEADER, v.source, ...v.header, 'content-length', String(Buffer.byteLength(body))];
  return { status: v.status, headers, body };
});

const LAST_RESORT_BODY = 'no decision: internal_error\n';
const LAST_RESORT_HEADERS = [
  'content-type', 'text/plain; charset=utf-8',
  'content-length', String(LAST_RESORT_BODY.length),
  'cache-control', 'no-store',
  DECISION_SOURCE_HEADER, 'fail-closed',
  DECISION_ERROR_HEADER, 'internal_error',
];

const NON_ASCII = /[^\x00-\x7f]/;
const utf8 = new TextDecoder('utf-8', { fatal: true });
/** Marks a header value whose bytes are not UTF-8. */
const NOT_UTF8 = Symbol('not UTF-8');

/**
 * A header value as the text it encodes. Node hands header values over as latin1 (one character
 * per byte); a proxy sends a user reference as UTF-8, as the check route's JSON body carries it and
 * as revocations name it (read as latin1, `ålice` would be `Ã¥lice`). Bytes that are not UTF-8 are refused.
 */
function utf8Value(value: string | null | undefined): string | null | undefined | typeof NOT_UTF8 {
  if (typeof value !== 'string' || !NON_ASCII.test(value)) return value;
  try {
    return utf8.decode(Buffer.from(value, 'latin1'));
  } catch {
    return NOT_UTF8;
  }
}

function checkValue(field: 'userReference' | 'configKey', where: string, value: string | null | undefined | typeof NOT_UTF8): InvalidRequest | undefined {
  if (value === NOT_UTF8) return { field, detail: `${where} is not UTF-8` };
  if (value === null) return { field, detail: `${where} is given more than once` };
  if (value === undefined || value === '') return { field, detail: `${field} is missing (${where})` };
  if (value.length > MAX_FIELD_LENGTH) return { field, detail: `${field} is longer than ${MAX_FIELD_LENGTH} characters` };
  return undefined;
}

/**
 * The request a proxy asks about, or what is wrong with it. The configKey comes from the
 * `configKey` query parameter of the bare path (beneath it, the query is the original request's,
 * which the client wrote) or from `x-consent-config-key`; both given and different is refused.
 */
export function parseForwardAuth(url: string, rawHeaders: readonly string[], userHeader: string): CheckRequest | InvalidRequest {
  const userReference = utf8Value(singleRaw(rawHeaders, userHeader));
  const badUser = checkValue('userReference', `header ${userHeader}`, userReference);
  if (badUser) return badUser;
  const fromHeaderValue = utf8Value(singleRaw(rawHeaders, CONFIG_KEY_HEADER));
  if (fromHeaderValue === NOT_UTF8) return checkValue('configKey', `header ${CONFIG_KEY_HEADER}`, fromHeaderValue)!;
  const fromHeader = fromHeaderValue;
  let fromQuery: string | null | undefined;
  if (url.charCodeAt(BARE_LENGTH) === 0x3f /* ? */) {
    const all = new URLSearchParams(url.slice(BARE_LENGTH + 1)).getAll('configKey');
    fromQuery = all.length > 1 ? null : all[0];
  }
  if (fromQuery === null) return { field: 'configKey', detail: 'query parameter configKey is given more than once' };
  if (fromQuery !== undefined && fromHeader !== undefined && fromQuery !== fromHeader) {
    return { field: 'configKey', detail: `query parameter configKey and header ${CONFIG_KEY_HEADER} differ` };
  }
  const configKey = fromQuery ?? fromHeader;
  const badKey = checkValue('configKey', `query parameter configKey or header ${CONFIG_KEY_HEADER}`, configKey);
  if (badKey) return badKey;
  return { userReference: userReference as string, configKey: configKey! };
}

/** Forward-auth's answers, through the decision boundary (counted once, with an id): plain text and headers for a proxy. */
export function forwardAuthBoundary(boundary: DecisionBoundary): RouteBoundary<ServerResponse> {
  return boundary.route('forward_auth', writeForProxy, proxyLastResort);
}

function writeForProxy(res: ServerResponse, a: Answer, decisionId: string): void {
  if (res.headersSent || res.destroyed) return;
  const r = rendered(a);
  res.writeHead(r.status, [...r.headers, DECISION_ID_HEADER, decisionId]);
  res.end(r.body);
}

/** A 503 with nothing that could throw again: no metrics, no render, no decision log. */
function proxyLastResort(res: ServerResponse): void {
  try {
    if (res.headersSent) res.destroy();
    else res.writeHead(503, LAST_RESORT_HEADERS).end(LAST_RESORT_BODY);
  } catch {
    res.destroy();
  }
}

/**
 * Serves `/sidecar/forward-auth[/…]`, any method: nginx `auth_request`, Envoy `ext_authz` (HTTP),
 * Traefik `ForwardAuth`. Same decision service as the check (cache, coalescing, breaker,
 * fail-closed causes); a client's `Cache-Control: no-cache` is ignored here, since the proxy
 * passes the client's headers along and the cache must not be bypassed from outside the pod.
 * Answers: 200 + `x-consent-valid-until` (ALLOW), 403 + `x-consent-deny-reason` (DENY),
 * 503 + `x-consent-decision-error` (no decision), 400 (missing or ambiguous user reference or
 * configKey), each with `x-consent-decision-id`. A request body, if any, is drained and ignored.
 */
export function createForwardAuth(o: ForwardAuthOptions): (req: IncomingMessage, res: ServerResponse) => void {
  const { service, answers } = o;
  const tracing = o.tracing ?? Tracing.OFF;
  return (req, res) => {
    const t0 = performance.now();
    req.resume();
    req.on('error', () => undefined);
    // A repeated traceparent is no trace context (W3C): dropped, like a malformed one.
    const tc = rawTraceContext(req.rawHeaders);
    const t = tc.traceparent === undefined && !tracing.on ? null : tracing.request('forward_auth', req.method ?? 'GET', FORWARD_AUTH_PATH, tc.traceparent, tc.tracestate);
    let asked: CheckRequest | undefined;
    try {
      const parsed = parseForwardAuth(req.url!, req.rawHeaders, o.userHeader);
      if ('field' in parsed) return answers.answer(res, rejectedAnswer(parsed), t0, undefined, t);
      asked = parsed;
      const hit = service.cached(asked);
      if (hit) return answers.answer(res, hit, t0, asked, t);
      answers.settle(res, service.decide(asked, { cacheMissed: true, trace: t }), t0, asked, t);
    } catch (err) {
      answers.fail(res, err, t0, asked, t);
    }
  };
}
