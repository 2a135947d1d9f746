/** What the application asks: the service's own request body. */
export interface CheckInput {
  readonly userReference: string;
  readonly configKey: string;
}

/**
 * The one allowed result: the sidecar answered 200 with a well-formed ALLOW for exactly the
 * configKey asked, whose `validUntil` was in the future when it arrived. Rely on it only while
 * {@link holdsAt} says so.
 */
export interface Allowed {
  readonly allowed: true;
  readonly kind: 'allow';
  readonly configKey: string;
  /** Epoch ms until which the ALLOW may be relied on, and not after. */
  readonly validUntil: number;
  /** `cache` or `upstream`, when the sidecar said. */
  readonly source?: string;
  /** The sidecar's id of this decision (`x-consent-decision-id`, or a batch item's `decisionId`). */
  readonly decisionId?: string;
}

/**
 * Why the answer is not an ALLOW:
 * - `deny`: the service denied; `cause` is `evaluated` (a decision about the data subject) or the
 *   pre-evaluation `reason` (`customer_not_found`, `config_not_published`, …: the tenant's configuration);
 * - `no_decision`: the sidecar could not have one (its 503); `cause` is its fail-closed cause (`upstream_timeout`, …);
 * - `invalid_request`: the sidecar refused the request (400), or the client did before sending it;
 * - `unexpected_answer`: an answer that is none of the above, or not unambiguously one (see {@link ClientCause});
 * - `unavailable`: no answer at all (timeout, refused, reset, aborted, closed client).
 */
export type NotAllowedKind = 'deny' | 'no_decision' | 'invalid_request' | 'unexpected_answer' | 'unavailable';

/**
 * The client's own causes (the sidecar's causes and the service's reasons are passed on as they are):
 * - `unexpected_answer`: `unexpected_status` (any status but 200, 400 and 503), `redirect` (3xx, never
 *   followed), `not_json` (content-type or body), `duplicate_member` (a member named twice in one object:
 *   `JSON.parse` would keep the last), `malformed` (wrong shape or types, members that contradict each
 *   other), `other_config_key` (an answer for another configKey than asked), `expired` (an ALLOW whose
 *   `validUntil` had passed when it arrived), `body_too_large`, `missing_item` (a batch answer without
 *   this item);
 * - `unavailable`: `timeout`, `aborted`, `unreachable`, `connection_reset`, `incomplete_body`, `closed`;
 * - `invalid_request`: `invalid_argument` (the input was refused before anything was sent), `batch_too_large`;
 * - `no_decision`: `unspecified` (a 503 that does not say its cause in the documented shape);
 * - `internal_error` (kind `unavailable`): an exception inside the client itself, never an ALLOW.
 */
export type ClientCause =
  | 'unexpected_status'
  | 'redirect'
  | 'not_json'
  | 'duplicate_member'
  | 'malformed'
  | 'other_config_key'
  | 'expired'
  | 'body_too_large'
  | 'missing_item'
  | 'timeout'
  | 'aborted'
  | 'unreachable'
  | 'connection_reset'
  | 'incomplete_body'
  | 'closed'
  | 'invalid_argument'
  | 'batch_too_large'
  | 'unspecified'
  | 'internal_error';

/** Every result that is not an ALLOW. Nothing in it allows anything. */
export interface NotAllowed {
  readonly allowed: false;
  readonly kind: NotAllowedKind;
  /** A {@link ClientCause}, the sidecar's fail-closed cause, or the service's deny reason (`evaluated` for an evaluated denial). */
  readonly cause: string;
  /** The HTTP status, when there was an answer. */
  readonly status?: number;
  /** The sidecar's id of this decision, when it gave one. */
  readonly decisionId?: string;
  /** A word more for a log line (the refused field, what was malformed). Never the user reference. */
  readonly detail?: string;
}

export type CheckResult = Allowed | NotAllowed;

/** Per call. */
export interface CallOptions {
  /** Aborting it ends the call with `unavailable`/`aborted`. */
  readonly signal?: AbortSignal;
  /** This call's whole deadline (ms), connecting and reading the body included; default: the client's. */
  readonly timeoutMs?: number;
}

/**
 * Whether `result` is an ALLOW that still holds at `instantMs` (epoch ms): an ALLOW is not to be
 * relied on at or after its `validUntil`. False for every other result.
 *
 * @example
 * const r = await client.check({ userReference: 'alice', configKey: 'marketing-email' });
 * if (holdsAt(r, Date.now())) sendTheEmail();
 */
export function holdsAt(result: CheckResult, instantMs: number): boolean {
  return result.allowed === true && result.kind === 'allow' && Number.isFinite(instantMs) && instantMs < result.validUntil;
}
