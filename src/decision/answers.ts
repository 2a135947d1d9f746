import type { FailClosedCause } from './errors.js';
import type { InvalidRequest } from './request.js';
import type { Answer, DecisionSource, ServiceDecision } from './types.js';

function answer(status: Answer['status'], decision: Answer['decision'], source: DecisionSource, body: object, cause?: string): Answer {
  const text = JSON.stringify(body);
  return Object.freeze({ status, decision, source, body: text, bodyBytes: Buffer.byteLength(text), ...(cause === undefined ? {} : { cause }) });
}

/**
 * An ALLOW body up to its `validUntil`: with `validUntil` (a safe integer) and `}` appended it is
 * what JSON.stringify({decision, configKey, validUntil}) writes, without building the object. The
 * cache keeps one per configKey.
 */
export function allowBodyPrefix(configKey: string): string {
  return `{"decision":"ALLOW","configKey":${JSON.stringify(configKey)},"validUntil":`;
}

/** The service's own shapes, rebuilt from the parsed fields only. */
export function decisionAnswer(d: ServiceDecision, source: 'cache' | 'upstream'): Answer {
  switch (d.kind) {
    case 'allow': {
      // Not frozen: it is this request's own.
      const body = `${allowBodyPrefix(d.configKey)}${d.validUntil}}`;
      return { status: 200, decision: 'allow', source, body, bodyBytes: Buffer.byteLength(body), validUntil: d.validUntil };
    }
    case 'evaluated_denial':
      return answer(200, 'deny', source, { decision: 'DENY', configKey: d.configKey });
    case 'pre_evaluation_denial':
      return answer(200, 'deny', source, { decision: 'DENY', reason: d.reason });
  }
}

const failClosedAnswers = new Map<FailClosedCause, Answer>();

/** 503 `{decision:"DENY", error:cause}`: no decision could be had. */
export function failClosedAnswer(cause: FailClosedCause): Answer {
  let a = failClosedAnswers.get(cause);
  if (!a) failClosedAnswers.set(cause, (a = answer(503, 'deny', 'fail-closed', { decision: 'DENY', error: cause }, cause)));
  return a;
}

/** 400 `{decision:"DENY", error:"invalid_request"}`, naming the field; the service was not called (408 or 431 when node's parser refused the request for its time or its headers). */
export function rejectedAnswer(invalid: InvalidRequest, status: 400 | 408 | 431 = 400): Answer {
  return answer(status, 'deny', 'rejected', {
    decision: 'DENY',
    error: 'invalid_request',
    field: invalid.field,
    ...(invalid.problem === undefined ? {} : { problem: invalid.problem }),
    detail: invalid.detail,
  });
}

/** 400 refusing a whole batch (no item decided), naming the field and, for an item, its index. */
export function refusedBatchAnswer(field: string, detail: string, index?: number): Answer {
  return answer(400, 'deny', 'rejected', { decision: 'DENY', error: 'invalid_request', field, ...(index === undefined ? {} : { index }), detail });
}

/** 405 for a method a route does not take, naming what it takes. */
export function methodNotAllowedAnswer(detail: string): Answer {
  return answer(405, 'deny', 'rejected', { decision: 'DENY', error: 'invalid_request', field: 'method', detail });
}

/** 405 for anything but POST on the check path. */
export const METHOD_NOT_ALLOWED_ANSWER = answer(405, 'deny', 'rejected', {
  decision: 'DENY',
  error: 'invalid_request',
  field: 'method',
  detail: 'POST /v1/authorization/check only',
});
