import { findDuplicateMember } from '../lib/duplicate-member.js';
import { DecisionError } from './errors.js';

/** The one key to {@link AllowedDecision}'s constructor: held by this module, exported nowhere. */
const PARSER: unique symbol = Symbol('parseCheckResponse');

/**
 * An ALLOW of the service for one request, as the fail-closed parser accepted it: its `configKey`
 * is the one asked (the very string the caller passed, so it costs no copy) and its `validUntil` a
 * safe integer later than both clocks when it was read. Only {@link parseCheckResponse} makes one:
 * the constructor is private and checks a key that only this module holds, so an ALLOW written
 * anywhere else (`{ kind: 'allow', … }`) does not compile, and one forged past the compiler throws.
 * The ALLOW cache stores these and nothing else, and every ALLOW answer is built from one
 * (`AllowAnswer.of`).
 */
export class AllowedDecision {
  /** Makes the type nominal: a structurally equal literal is not an AllowedDecision. No field at run time. */
  private declare readonly minted: typeof PARSER;

  private constructor(
    key: typeof PARSER,
    readonly configKey: string,
    /**
     * `validUntil` in decimal, as `JSON.stringify` writes it: kept as text, so that an answer built
     * from a cached ALLOW (every cache hit) formats no number and reads no boxed one.
     */
    readonly validUntilText: string,
  ) {
    if (key !== PARSER) throw new TypeError('an AllowedDecision is made by parseCheckResponse only');
  }

  /** The discriminant of {@link ServiceDecision}, on the prototype (no field per cached entry). */
  get kind(): 'allow' {
    return 'allow';
  }

  /** Epoch ms (a safe integer) until which the service allows it. */
  get validUntil(): number {
    return Number(this.validUntilText);
  }

  /** The constructor's only way in, for {@link parseCheckResponse}: `key` is this module's and nobody else's. */
  static mint(key: typeof PARSER, configKey: string, validUntil: number): AllowedDecision {
    return new AllowedDecision(key, configKey, String(validUntil));
  }
}

/** A well-formed answer of the service, as the strict parser accepts it. */
export type ServiceDecision =
  | AllowedDecision
  | { readonly kind: 'evaluated_denial'; readonly configKey: string }
  | { readonly kind: 'pre_evaluation_denial'; readonly reason: string };

/** What the upstream client read: the status, the `Date` header and the whole body. */
export interface UpstreamResponse {
  readonly status: number;
  readonly date: string | undefined;
  readonly body: string;
}

export interface ParsedDecision {
  readonly decision: ServiceDecision;
  /** The service's clock from its `Date` header (ms), when present and valid. */
  readonly serviceNowMs: number | undefined;
}

const has = (o: object, k: string): boolean => Object.prototype.hasOwnProperty.call(o, k);

/** The last `Date` value read and its time: the header changes once a second, answers come faster. */
let lastDate = '';
let lastDateMs = Number.NaN;
function parseDate(date: string): number {
  if (date !== lastDate) {
    lastDateMs = Date.parse(date);
    lastDate = date;
  }
  return lastDateMs;
}

/**
 * The fail-closed parser. The only way out with an {@link AllowedDecision} is: status 200, a JSON
 * object, `decision` exactly `"ALLOW"`, `configKey` equal to the key asked, `validUntil` a safe
 * integer later than both the local clock and the service's `Date`, no `reason`, and no member name
 * twice in any object of the body. Everything else is a well-formed DENY (kept in its shape) or a
 * {@link DecisionError}. The ALLOW carries `askedConfigKey` itself (equal to the service's), so a
 * caller that passes a string it already holds (the ALLOW cache's copy) adds none.
 */
export function parseCheckResponse(res: UpstreamResponse, askedConfigKey: string, nowMs: number): ParsedDecision {
  if (res.status !== 200) {
    if (res.status >= 500 && res.status <= 599) throw new DecisionError('ERR_UPSTREAM_STATUS_5XX', `service answered ${res.status}`);
    if (res.status >= 400 && res.status <= 499) throw new DecisionError('ERR_UPSTREAM_STATUS_4XX', `service answered ${res.status}`);
    throw new DecisionError('ERR_UPSTREAM_STATUS_OTHER', `service answered ${res.status}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(res.body);
  } catch {
    throw new DecisionError('ERR_UPSTREAM_MALFORMED', 'body is not JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new DecisionError('ERR_UPSTREAM_MALFORMED', 'body is not a JSON object');
  }
  // JSON.parse keeps the last of duplicated members: `{"decision":"DENY","decision":"ALLOW"}` would
  // read as ALLOW. The document says an ambiguous state yields DENY; two answers in one body are one.
  const duplicate = findDuplicateMember(res.body);
  if (duplicate !== undefined) throw new DecisionError('ERR_UPSTREAM_CONTRADICTORY', `member "${duplicate.slice(0, 64)}" appears twice`);
  const o = value as Record<string, unknown>;
  const dateMs = res.date === undefined ? Number.NaN : parseDate(res.date);
  const serviceNowMs = Number.isFinite(dateMs) ? dateMs : undefined;

  if (o.decision === 'ALLOW') {
    if (typeof o.configKey !== 'string') throw new DecisionError('ERR_UPSTREAM_MALFORMED', 'ALLOW without a string configKey');
    if (o.configKey !== askedConfigKey) throw new DecisionError('ERR_UPSTREAM_CONTRADICTORY', 'ALLOW for another configKey');
    if (has(o, 'reason')) throw new DecisionError('ERR_UPSTREAM_CONTRADICTORY', 'ALLOW carrying a reason');
    const validUntil = o.validUntil;
    if (typeof validUntil !== 'number' || !Number.isSafeInteger(validUntil) || validUntil <= 0) {
      throw new DecisionError('ERR_UPSTREAM_MALFORMED', 'ALLOW without an integer validUntil');
    }
    // The document: "must not cache an authorization beyond validUntil". If either clock says it
    // has passed, it cannot be relied on now.
    if (validUntil <= nowMs || (serviceNowMs !== undefined && validUntil <= serviceNowMs)) {
      throw new DecisionError('ERR_UPSTREAM_EXPIRED', 'ALLOW already expired on arrival');
    }
    return { decision: AllowedDecision.mint(PARSER, askedConfigKey, validUntil), serviceNowMs };
  }

  if (o.decision === 'DENY') {
    const hasReason = has(o, 'reason');
    const hasKey = has(o, 'configKey');
    if (hasReason && hasKey) throw new DecisionError('ERR_UPSTREAM_CONTRADICTORY', 'DENY with both reason and configKey');
    if (hasReason) {
      if (typeof o.reason !== 'string' || o.reason === '') throw new DecisionError('ERR_UPSTREAM_MALFORMED', 'DENY with a non-string reason');
      return { decision: { kind: 'pre_evaluation_denial', reason: o.reason }, serviceNowMs };
    }
    if (hasKey) {
      if (typeof o.configKey !== 'string') throw new DecisionError('ERR_UPSTREAM_MALFORMED', 'DENY with a non-string configKey');
      if (o.configKey !== askedConfigKey) throw new DecisionError('ERR_UPSTREAM_CONTRADICTORY', 'DENY for another configKey');
      return { decision: { kind: 'evaluated_denial', configKey: o.configKey }, serviceNowMs };
    }
    throw new DecisionError('ERR_UPSTREAM_MALFORMED', 'DENY with neither configKey nor reason');
  }
  throw new DecisionError('ERR_UPSTREAM_MALFORMED', 'decision is neither "ALLOW" nor "DENY"');
}
