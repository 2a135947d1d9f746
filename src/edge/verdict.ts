import { AllowAnswer, type Answer, type DecisionSource } from '../decision/index.js';
import { DECISION_ERROR_HEADER, DENY_REASON_HEADER, VALID_UNTIL_HEADER } from './decision-headers.js';

/**
 * A decision answer as a proxy acts on it, whatever the transport (forward-auth over HTTP, gRPC
 * ext_authz): let the request through, or refuse it with a status, a header naming why and a line
 * of text.
 */
export interface Verdict {
  /** 200 only for an {@link AllowAnswer}; 403 a DENY of the service; 400 a refused request; 503 no decision. */
  readonly status: 200 | 400 | 403 | 503;
  readonly source: DecisionSource;
  /**
   * Why, as a header: `x-consent-valid-until` (ALLOW), `x-consent-deny-reason` (DENY) or
   * `x-consent-decision-error` (a refused request: `invalid_request`; no decision: its cause).
   */
  readonly header: readonly [name: string, value: string];
  /** Why, as structured data: `validUntil` (epoch ms), `reason` or `error`, with the header's value. */
  readonly why: readonly [key: 'validUntil' | 'reason' | 'error', value: number | string];
  /** The line a proxy may show (no newline): `allow`, `deny: <reason>`, `invalid request: <field>: <detail>`, `no decision: <cause>`. */
  readonly message: string;
}

/** A reason or cause goes into a header only when it is a plain token; else `other` (a reason) or `internal_error` (a cause). */
const TOKEN = /^[A-Za-z0-9_.:-]{1,128}$/;

/**
 * The fail-closed mapping of every transport: 200 only for an {@link AllowAnswer} (made from an
 * ALLOW the fail-closed parser accepted, by the decision service or its cache; a look-alike object
 * is not one); a DENY of the service is 403 with its reason (`evaluated` when it gives none); a
 * refused request 400; anything else (no decision, an answer this code does not know) 503 with its
 * cause. Any answer but an ALLOW has a body of the service's own shape, already validated, so
 * reading it back is safe.
 */
export function verdictOf(a: Answer): Verdict {
  if (a instanceof AllowAnswer) {
    return { status: 200, source: a.source, header: [VALID_UNTIL_HEADER, a.validUntilText], why: ['validUntil', a.validUntil], message: 'allow' };
  }
  const body = JSON.parse(a.body) as { reason?: unknown; error?: unknown; field?: unknown; detail?: unknown };
  if (a.status === 200 && a.decision === 'deny') {
    const reason = body.reason === undefined ? 'evaluated' : typeof body.reason === 'string' && TOKEN.test(body.reason) ? body.reason : 'other';
    return { status: 403, source: a.source, header: [DENY_REASON_HEADER, reason], why: ['reason', reason], message: `deny: ${reason}` };
  }
  if (a.status === 400) {
    const message = `invalid request: ${String(body.field)}: ${String(body.detail)}`;
    return { status: 400, source: a.source, header: [DECISION_ERROR_HEADER, 'invalid_request'], why: ['error', 'invalid_request'], message };
  }
  const cause = typeof body.error === 'string' && TOKEN.test(body.error) ? body.error : 'internal_error';
  return { status: 503, source: a.source, header: [DECISION_ERROR_HEADER, cause], why: ['error', cause], message: `no decision: ${cause}` };
}

/**
 * `render` with what it makes of each shared answer kept (fail-closed, refused and DENY answers
 * are shared objects: rendered once each). An ALLOW is this request's own object: rendered and
 * dropped, never kept.
 */
export function renderedOnce<T>(render: (a: Answer) => T): (a: Answer) => T {
  const kept = new WeakMap<Answer, T>();
  return (a) => {
    if (a instanceof AllowAnswer) return render(a);
    let r = kept.get(a);
    if (r === undefined) kept.set(a, (r = render(a)));
    return r;
  };
}
