import { AllowAnswer, type Answer } from '../decision/index.js';
import { DECISION_ID_HEADER } from '../http/decision-boundary.js';
import { DECISION_ERROR_HEADER, DENY_REASON_HEADER, VALID_UNTIL_HEADER } from '../http/forward-auth.js';
import { encodeMessage, type ProtoField } from './wire.js';

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
 * The fail-closed mapping, as forward-auth's: code 0 only for an {@link AllowAnswer} (made from an
 * ALLOW the fail-closed parser accepted, by the decision service or its cache); a DENY of
 * the service is PERMISSION_DENIED (403), a refused request INVALID_ARGUMENT (400), anything else
 * (no decision, an answer this code does not know) UNAVAILABLE (503) with its cause.
 */
function verdictOf(a: Answer): Verdict {
  if (a instanceof AllowAnswer) {
    return {
      code: GRPC_CODE.OK,
      httpStatus: 0,
      message: 'allow',
      headers: [[VALID_UNTIL_HEADER, a.validUntilText]],
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
  if (a instanceof AllowAnswer) return verdictOf(a);
  let v = verdicts.get(a);
  if (!v) verdicts.set(a, (v = verdictOf(a)));
  return v;
}

function headerOption(field: number, name: string, value: string): ProtoField {
  return [field, 'm', [[OPTION_HEADER, 'm', [[HEADER_KEY, 's', name], [HEADER_VALUE, 's', value]]], [OPTION_APPEND_ACTION, 'v', OVERWRITE_IF_EXISTS_OR_ADD]]];
}

/** google.protobuf.Struct: each entry a map entry {key, Value}, a Value a number or a string. */
function struct(entries: readonly (readonly [string, string | number])[]): ProtoField[] {
  return entries.map(([k, v]): ProtoField => [STRUCT_FIELDS, 'm', [[1, 's', k], [2, 'm', [typeof v === 'number' ? [VALUE_NUMBER, 'd', v] : [VALUE_STRING, 's', v]]]]]);
}

const TEXT_PLAIN = ['content-type', 'text/plain; charset=utf-8'] as const;

function encode(v: Verdict, decisionId: string): Buffer {
  const status: ProtoField[] = v.code === 0 ? [[STATUS_MESSAGE, 's', v.message]] : [[STATUS_CODE, 'v', v.code], [STATUS_MESSAGE, 's', v.message]];
  const headers = [...v.headers, [DECISION_ID_HEADER, decisionId] as const];
  const response: ProtoField =
    v.httpStatus === 0
      ? [RESPONSE_OK, 'm', headers.map(([k, value]) => headerOption(OK_HEADERS, k, value))]
      : [
          RESPONSE_DENIED,
          'm',
          [
            [DENIED_STATUS, 'm', [[HTTP_STATUS_CODE, 'v', v.httpStatus]]],
            ...[TEXT_PLAIN, ...headers].map(([k, value]) => headerOption(DENIED_HEADERS, k, value)),
            [DENIED_BODY, 's', `${v.message}\n`],
          ],
        ];
  return encodeMessage([[RESPONSE_STATUS, 'm', status], response, [RESPONSE_DYNAMIC_METADATA, 'm', struct([...v.metadata, ['decisionId', decisionId]])]]);
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
export const LAST_RESORT_RESPONSE: Buffer = encodeMessage([
  [RESPONSE_STATUS, 'm', [[STATUS_CODE, 'v', GRPC_CODE.UNAVAILABLE], [STATUS_MESSAGE, 's', 'no decision: internal_error']]],
  [
    RESPONSE_DENIED,
    'm',
    [
      [DENIED_STATUS, 'm', [[HTTP_STATUS_CODE, 'v', 503]]],
      headerOption(DENIED_HEADERS, DECISION_ERROR_HEADER, 'internal_error'),
      [DENIED_BODY, 's', 'no decision: internal_error\n'],
    ],
  ],
]);
