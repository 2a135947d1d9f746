import type { Answer } from '../decision/index.js';
import { DECISION_ERROR_HEADER, DECISION_ID_HEADER, DECISION_SOURCE_HEADER } from '../edge/decision-headers.js';
import { renderedOnce, verdictOf } from '../edge/verdict.js';
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

/** How one answer reads to Envoy, before its decision id is added. */
interface EnvoyVerdict {
  readonly code: (typeof GRPC_CODE)[keyof typeof GRPC_CODE];
  /** The HTTP status of the denied response; 0 for an ALLOW (ok_response). */
  readonly httpStatus: 0 | 400 | 403 | 503;
  readonly message: string;
  /** Headers: on the request let through (ALLOW), or on the denied response. */
  readonly headers: readonly (readonly [string, string])[];
  /** dynamic_metadata entries besides the decision id: string or number values. */
  readonly metadata: readonly (readonly [string, string | number])[];
}

/** The google.rpc.Code of each verdict's status. */
const CODE_OF_STATUS = { 200: GRPC_CODE.OK, 400: GRPC_CODE.INVALID_ARGUMENT, 403: GRPC_CODE.PERMISSION_DENIED, 503: GRPC_CODE.UNAVAILABLE } as const;

/**
 * An answer's {@link verdictOf} (the fail-closed mapping forward-auth renders too) as Envoy takes
 * it: code 0 and ok_response only for an ALLOW; a DENY of the service PERMISSION_DENIED (403), a
 * refused request INVALID_ARGUMENT (400), anything else UNAVAILABLE (503) with its cause.
 */
const envoyVerdict = renderedOnce((a: Answer): EnvoyVerdict => {
  const v = verdictOf(a);
  const metadata = [['decision', v.status === 200 ? 'ALLOW' : 'DENY'], ['source', v.source], v.why] as const;
  if (v.status === 200) return { code: GRPC_CODE.OK, httpStatus: 0, message: v.message, headers: [v.header], metadata };
  const headers = [['cache-control', 'no-store'], [DECISION_SOURCE_HEADER, v.source], v.header] as const;
  return { code: CODE_OF_STATUS[v.status], httpStatus: v.status, message: v.message, headers, metadata };
});

function headerOption(field: number, name: string, value: string): ProtoField {
  return [field, 'm', [[OPTION_HEADER, 'm', [[HEADER_KEY, 's', name], [HEADER_VALUE, 's', value]]], [OPTION_APPEND_ACTION, 'v', OVERWRITE_IF_EXISTS_OR_ADD]]];
}

/** google.protobuf.Struct: each entry a map entry {key, Value}, a Value a number or a string. */
function struct(entries: readonly (readonly [string, string | number])[]): ProtoField[] {
  return entries.map(([k, v]): ProtoField => [STRUCT_FIELDS, 'm', [[1, 's', k], [2, 'm', [typeof v === 'number' ? [VALUE_NUMBER, 'd', v] : [VALUE_STRING, 's', v]]]]]);
}

const TEXT_PLAIN = ['content-type', 'text/plain; charset=utf-8'] as const;

function encode(v: EnvoyVerdict, decisionId: string): Buffer {
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
  return encode(envoyVerdict(a), decisionId);
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
