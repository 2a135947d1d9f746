import type { Answer } from '../decision/index.js';
import { DECISION_ID_HEADER } from '../http/decision-boundary.js';
import { DECISION_ERROR_HEADER, DENY_REASON_HEADER, VALID_UNTIL_HEADER } from '../http/forward-auth.js';
import { ProtoWriter } from './wire.js';

/** google.rpc.Code values the sidecar answers with. */
export const GRPC_CODE = { OK: 0, INVALID_ARGUMENT: 3, PERMISSION_DENIED: 7, UNAVAILABLE: 14 } as const;

// Field numbers (src/grpc/proto).
const RESPONSE_STATUS = 1;
const RESPONSE_DENIED = 2;
const RESPONSE_OK = 3;
const RESPONSE_DYNAMIC_METADATA = 4;
const STATUS_CODE = 1;
const STATUS_MESSAGE = 2;
const DENIED_STATUS = 1;
const DENIED_HEADERS = 2;
const DENIED_BODY = 3;
const OK_HEADERS = 2;
const HTTP_STATUS_CODE = 1;
const OPTION_HEADER = 1;
const OPTION_APPEND_ACTION = 3;
const HEADER_KEY = 1;
const HEADER_VALUE = 2;
const STRUCT_FIELDS = 1;
const VALUE_NUMBER = 2;
const VALUE_STRING = 3;
/** HeaderValueOption.HeaderAppendAction: a header the client sent under the same name is replaced, never kept beside ours. */
const OVERWRITE_IF_EXISTS_OR_ADD = 2;

/** A reason or cause goes into a header only when it is a plain token; else `other` (as forward-auth). */
const TOKEN = /^[A-Za-z0-9_.:-]{1,128}$/;

/** How one answer reads to Envoy, before its decision id is added. */
interface Verdict {
  readonly code: (typeof GRPC_CODE)[keyof typeof GRPC_CODE];
  /** The HTTP status of the denied response; 0 for an ALLOW (ok_response). */
  readonly httpStatus: 0 | 400 | 403 | 503;
  readonly message: string;
  /** Headers: on the request let through (ALLOW), or on the denied response. */
  readonly headers: readonly (readonly [string, string])[];
  /** dynamic_metadata entries besides the decision id: string or number values. */
  readonly metadata: readonly (readonly [string, string | number])[];
}

/**
 * The fail-closed mapping, as forward-auth's: code 0 only for an ALLOW answer with status 200 and
 * its `validUntil` (built from a verified ALLOW, by the decision service or its cache); a DENY of
 * the service is PERMISSION_DENIED (403), a refused request INVALID_ARGUMENT (400), anything else
 * (no decision, an answer this code does not know) UNAVAILABLE (503) with its cause.
 */
function verdictOf(a: Answer): Verdict {
  if (a.status === 200 && a.decision === 'allow' && typeof a.validUntil === 'number') {
    return {
      code: GRPC_CODE.OK,
      httpStatus: 0,
      message: 'allow',
      headers: [[VALID_UNTIL_HEADER, String(a.validUntil)]],
      metadata: [['decision', 'ALLOW'], ['source', a.source], ['validUntil', a.validUntil]],
    };
  }
  const body = JSON.parse(a.body) as { reason?: unknown; error?: unknown; field?: unknown; detail?: unknown };
  const common = [['cache-control', 'no-store'], ['x-consent-decision-source', a.source]] as const;
  if (a.status === 200 && a.decision === 'deny') {
    const reason = body.reason === undefined ? 'evaluated' : typeof body.reason === 'string' && TOKEN.test(body.reason) ? body.reason : 'other';
    return { code: GRPC_CODE.PERMISSION_DENIED, httpStatus: 403, message: `deny: ${reason}`, headers: [...common, [DENY_REASON_HEADER, reason]], metadata: [['decision', 'DENY'], ['source', a.source], ['reason', reason]] };
  }
  if (a.status === 400) {
    return {
      code: GRPC_CODE.INVALID_ARGUMENT,
      httpStatus: 400,
      message: `invalid request: ${String(body.field)}: ${String(body.detail)}`,
      headers: [...common, [DECISION_ERROR_HEADER, 'invalid_request']],
      metadata: [['decision', 'DENY'], ['source', a.source], ['error', 'invalid_request']],
    };
  }
  const cause = typeof body.error === 'string' && TOKEN.test(body.error) ? body.error : 'internal_error';
  return { code: GRPC_CODE.UNAVAILABLE, httpStatus: 503, message: `no decision: ${cause}`, headers: [...common, [DECISION_ERROR_HEADER, cause]], metadata: [['decision', 'DENY'], ['source', a.source], ['error', cause]] };
}

const verdicts = new WeakMap<Answer, Verdict>();

function verdict(a: Answer): Verdict {
  // An ALLOW is this request's own object: mapped and dropped. Shared answers are mapped once.
  if (a.decision === 'allow') return verdictOf(a);
  let v = verdicts.get(a);
  if (!v) verdicts.set(a, (v = verdictOf(a)));
  return v;
}

function headerOption(name: string, value: string): Buffer {
  const header = new ProtoWriter().bytes(HEADER_KEY, name).bytes(HEADER_VALUE, value).finish();
  return new ProtoWriter().bytes(OPTION_HEADER, header).varint(OPTION_APPEND_ACTION, OVERWRITE_IF_EXISTS_OR_ADD).finish();
}

function struct(entries: readonly (readonly [string, string | number])[]): Buffer {
  const w = new ProtoWriter();
  for (const [k, v] of entries) {
    const value = typeof v === 'number' ? new ProtoWriter().double(VALUE_NUMBER, v).finish() : new ProtoWriter().bytes(VALUE_STRING, v).finish();
    w.bytes(STRUCT_FIELDS, new ProtoWriter().bytes(1, k).bytes(2, value).finish());
  }
  return w.finish();
}

function encode(v: Verdict, decisionId: string): Buffer {
  const status = new ProtoWriter();
  if (v.code !== 0) status.varint(STATUS_CODE, v.code);
  status.bytes(STATUS_MESSAGE, v.message);
  const headers = [...v.headers, [DECISION_ID_HEADER, decisionId] as const];
  const w = new ProtoWriter().bytes(RESPONSE_STATUS, status.finish());
  if (v.httpStatus === 0) {
    const ok = new ProtoWriter();
    for (const [k, value] of headers) ok.bytes(OK_HEADERS, headerOption(k, value));
    w.bytes(RESPONSE_OK, ok.finish());
  } else {
    const denied = new ProtoWriter().bytes(DENIED_STATUS, new ProtoWriter().varint(HTTP_STATUS_CODE, v.httpStatus).finish());
    for (const [k, value] of [['content-type', 'text/plain; charset=utf-8'] as const, ...headers]) denied.bytes(DENIED_HEADERS, headerOption(k, value));
    denied.bytes(DENIED_BODY, `${v.message}\n`);
    w.bytes(RESPONSE_DENIED, denied.finish());
  }
  return w.bytes(RESPONSE_DYNAMIC_METADATA, struct([...v.metadata, ['decisionId', decisionId]])).finish();
}

/**
 * The CheckResponse for a decision answer with its id: ALLOW → OK with ok_response adding
 * `x-consent-valid-until` and `x-consent-decision-id` to the request; DENY → PERMISSION_DENIED,
 * 403 and `x-consent-deny-reason`; a bad request → INVALID_ARGUMENT, 400; no decision →
 * UNAVAILABLE, 503 and `x-consent-decision-error`. Each with dynamic_metadata (`decision`,
 * `source`, `decisionId`, and `validUntil`, `reason` or `error`). Never a gRPC error.
 */
export function checkResponseFor(a: Answer, decisionId: string): Buffer {
  return encode(verdict(a), decisionId);
}

/** The fixed answer when even building one failed: UNAVAILABLE, 503 `internal_error`, no id. */
export const LAST_RESORT_RESPONSE: Buffer = (() => {
  const status = new ProtoWriter().varint(STATUS_CODE, GRPC_CODE.UNAVAILABLE).bytes(STATUS_MESSAGE, 'no decision: internal_error').finish();
  const denied = new ProtoWriter()
    .bytes(DENIED_STATUS, new ProtoWriter().varint(HTTP_STATUS_CODE, 503).finish())
    .bytes(DENIED_HEADERS, headerOption(DECISION_ERROR_HEADER, 'internal_error'))
    .bytes(DENIED_BODY, 'no decision: internal_error\n')
    .finish();
  return new ProtoWriter().bytes(RESPONSE_STATUS, status).bytes(RESPONSE_DENIED, denied).finish();
})();
