import { AllowAnswer } from './allow-answer.js';
import type { FailClosedCause } from './errors.js';
import type { ServiceDecision } from './parse-response.js';
import type { InvalidRequest } from './request.js';
import type { Answer, DecisionSource, DenyAnswer } from './types.js';

/** A DENY answer: `{"decision":"DENY", …fields}`, frozen (most are shared). `fields` is never empty. */
function answer(status: DenyAnswer['status'], source: DecisionSource, fields: object, cause?: string): DenyAnswer {
  const body: DenyAnswer['body'] = `{"decision":"DENY",${JSON.stringify(fields).slice(1)}`;
  return Object.freeze({ status, decision: 'deny', source, body, bodyBytes: Buffer.byteLength(body), ...(cause === undefined ? {} : { cause }) });
}

/** The service's own shapes, rebuilt from the parsed fields only. */
export function decisionAnswer(d: ServiceDecision, source: 'cache' | 'upstream'): Answer {
  switch (d.kind) {
    case 'allow':
      // Not shared: it is this request's own.
      return AllowAnswer.of(d, source);
    case 'evaluated_denial':
      return answer(200, source, { configKey: d.configKey });
    case 'pre_evaluation_denial':
      return answer(200, source, { reason: d.reason });
  }
}

const failClosedAnswers = new Map<FailClosedCause, DenyAnswer>();

/** 503 `{decision:"DENY", error:cause}`: no decision could be had. */
export function failClosedAnswer(cause: FailClosedCause): DenyAnswer {
  let a = failClosedAnswers.get(cause);
  if (!a) failClosedAnswers.set(cause, (a = answer(503, 'fail-closed', { error: cause }, cause)));
  return a;
}

/** 400 `{decision:"DENY", error:"invalid_request"}`, naming the field; the service was not called (408 or 431 when node's parser refused the request for its time or its headers). */
export function rejectedAnswer(invalid: InvalidRequest, status: 400 | 408 | 431 = 400): DenyAnswer {
  return answer(status, 'rejected', {
    error: 'invalid_request',
    field: invalid.field,
    ...(invalid.problem === undefined ? {} : { problem: invalid.problem }),
    detail: invalid.detail,
  });
}

/** 400 refusing a whole batch (no item decided), naming the field and, for an item, its index. */
export function refusedBatchAnswer(field: string, detail: string, index?: number): DenyAnswer {
  return answer(400, 'rejected', { error: 'invalid_request', field, ...(index === undefined ? {} : { index }), detail });
}

/** 405 for a method a route does not take, naming what it takes. */
export function methodNotAllowedAnswer(detail: string): DenyAnswer {
  return answer(405, 'rejected', { error: 'invalid_request', field: 'method', detail });
}

/** 405 for anything but POST on the check path. */
export const METHOD_NOT_ALLOWED_ANSWER = answer(405, 'rejected', {
  error: 'invalid_request',
  field: 'method',
  detail: 'POST /v1/authorization/check only',
});
