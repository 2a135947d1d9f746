import { describe, expect, it } from 'vitest';
import { decisionAnswer, failClosedAnswer, parseCheckResponse, rejectedAnswer, type Answer } from '../../src/decision/index.js';
import { renderedOnce, verdictOf, type Verdict } from '../../src/edge/verdict.js';
import { allowAnswerFor } from '../helpers/allowed.js';
import { deny, preDeny } from '../helpers/upstream.js';

/**
 * The one verdict → transport mapping: forward-auth renders it as plain text and headers, gRPC
 * ext_authz as a CheckResponse (test/http/forward-auth*.test.ts, test/grpc/*.test.ts hold each
 * transport to it end to end). Here the mapping itself, answer by answer.
 */
const UNTIL = 1_900_000_000_000;

/** A DENY of the service, read by the parser as the sidecar reads it. */
function serviceDeny(body: Record<string, unknown>): Answer {
  const { decision } = parseCheckResponse({ status: 200, date: undefined, body: JSON.stringify(body) }, 'k', 0);
  if (decision.kind === 'allow') throw new Error('the parser took a DENY for an ALLOW');
  return decisionAnswer(decision, 'upstream');
}

const cases: [string, () => Answer, Verdict][] = [
  [
    'an ALLOW of the parser: 200, its validUntil',
    () => allowAnswerFor('k', UNTIL, 'cache'),
    { status: 200, source: 'cache', header: ['x-consent-valid-until', String(UNTIL)], why: ['validUntil', UNTIL], message: 'allow' },
  ],
  [
    'an evaluated DENY: 403, reason evaluated',
    () => serviceDeny(deny('k')),
    { status: 403, source: 'upstream', header: ['x-consent-deny-reason', 'evaluated'], why: ['reason', 'evaluated'], message: 'deny: evaluated' },
  ],
  [
    'a pre-evaluation DENY: 403, its reason',
    () => serviceDeny(preDeny('customer_not_found')),
    { status: 403, source: 'upstream', header: ['x-consent-deny-reason', 'customer_not_found'], why: ['reason', 'customer_not_found'], message: 'deny: customer_not_found' },
  ],
  [
    'a DENY whose reason is no plain token: 403, other (never a header value of the service’s choosing)',
    () => {
      const body = '{"decision":"DENY","reason":"a\\r\\nset-cookie: x"}' as const;
      return { status: 200, decision: 'deny', source: 'upstream', body, bodyBytes: Buffer.byteLength(body) };
    },
    { status: 403, source: 'upstream', header: ['x-consent-deny-reason', 'other'], why: ['reason', 'other'], message: 'deny: other' },
  ],
  [
    'a refused request: 400, invalid_request, naming the field',
    () => rejectedAnswer({ field: 'userReference', detail: 'userReference is missing (header x-user-reference)' }),
    {
      status: 400,
      source: 'rejected',
      header: ['x-consent-decision-error', 'invalid_request'],
      why: ['error', 'invalid_request'],
      message: 'invalid request: userReference: userReference is missing (header x-user-reference)',
    },
  ],
  [
    'no decision: 503, its cause',
    () => failClosedAnswer('upstream_timeout'),
    { status: 503, source: 'fail-closed', header: ['x-consent-decision-error', 'upstream_timeout'], why: ['error', 'upstream_timeout'], message: 'no decision: upstream_timeout' },
  ],
];

describe('verdictOf', () => {
  it.each(cases)('%s', (_name, answer, verdict) => {
    expect(verdictOf(answer())).toEqual(verdict);
  });

  it('an ALLOW look-alike forged past the compiler is no ALLOW: 503, internal_error', () => {
    const body = `{"decision":"ALLOW","configKey":"k","validUntil":${UNTIL}}`;
    // @ts-expect-error a literal ALLOW is not an Answer (only the parser's AllowAnswer is)
    const forged: Answer = { status: 200, decision: 'allow', source: 'upstream', body, bodyBytes: body.length, validUntil: UNTIL, validUntilText: String(UNTIL) };
    expect(verdictOf(forged)).toEqual({ status: 503, source: 'upstream', header: ['x-consent-decision-error', 'internal_error'], why: ['error', 'internal_error'], message: 'no decision: internal_error' });
  });
});

describe('renderedOnce', () => {
  it('renders a shared answer once, and an ALLOW (a request’s own) every time, keeping nothing of it', () => {
    const rendered: Answer[] = [];
    const render = renderedOnce((a) => (rendered.push(a), verdictOf(a)));
    const shared = failClosedAnswer('upstream_5xx');
    const allow = allowAnswerFor('k', UNTIL, 'upstream');
    expect(render(shared)).toBe(render(shared));
    expect(render(allow)).not.toBe(render(allow));
    expect(rendered).toEqual([shared, allow, allow]);
  });
});
