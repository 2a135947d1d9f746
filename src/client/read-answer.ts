import { findDuplicateMember } from '../lib/duplicate-member.js';
import type { CheckInput, CheckResult, ClientCause, NotAllowed, NotAllowedKind } from './types.js';

/** An answer as it came off the wire, whole (the transport enforced the size cap and the deadline). */
export interface RawAnswer {
  readonly status: number;
  readonly contentType: string | undefined;
  readonly body: Uint8Array;
  /** `x-consent-decision-id` as received (a repeated header is none). */
  readonly decisionId: string | undefined;
  /** `x-consent-decision-source` as received. */
  readonly source?: string | undefined;
}

/** A decision id worth passing on: one token of visible ASCII. Anything else is dropped. */
const TOKEN = /^[\x21-\x7e]{1,128}$/;
/** A fail-closed cause as the sidecar writes it. */
const CAUSE = /^[a-z0-9_]{1,64}$/;
const JSON_MEDIA = /^application\/json\s*(?:;|$)/i;
// Fatal: bytes that are not UTF-8 are no answer. ignoreBOM keeps a BOM in the text, so JSON.parse refuses it.
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

const not = (kind: NotAllowedKind, cause: string, extra: { status?: number; decisionId?: string | undefined; detail?: string } = {}): NotAllowed => {
  const r: { -readonly [K in keyof NotAllowed]: NotAllowed[K] } = { allowed: false, kind, cause };
  if (extra.status !== undefined) r.status = extra.status;
  if (extra.decisionId !== undefined) r.decisionId = extra.decisionId;
  if (extra.detail !== undefined) r.detail = extra.detail;
  return Object.freeze(r);
};
const unexpected = (cause: ClientCause, status: number, decisionId: string | undefined, detail?: string): NotAllowed =>
  not('unexpected_answer', cause, { status, decisionId, ...(detail === undefined ? {} : { detail }) });

const tokenOr = (v: unknown): string | undefined => (typeof v === 'string' && TOKEN.test(v) ? v : undefined);
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
/** True when `o` has exactly the members `names`, no fewer, no more. */
function exactly(o: Record<string, unknown>, names: readonly string[]): boolean {
  const keys = Object.keys(o);
  return keys.length === names.length && names.every((n) => Object.prototype.hasOwnProperty.call(o, n));
}

/**
 * The body as one JSON object in which no object, at any depth, names a member twice
 * (`JSON.parse` would keep the last: `{"decision":"DENY","decision":"ALLOW"}` reads as ALLOW).
 */
function jsonObject(a: RawAnswer): Record<string, unknown> | 'not_json' | 'duplicate_member' | 'malformed' {
  if (a.contentType === undefined || !JSON_MEDIA.test(a.contentType)) return 'not_json';
  let text: string;
  let value: unknown;
  try {
    text = utf8.decode(a.body);
    value = JSON.parse(text);
  } catch {
    return 'not_json';
  }
  if (findDuplicateMember(text) !== undefined) return 'duplicate_member';
  return isObject(value) ? value : 'malformed';
}

/**
 * One decision body: an ALLOW, an evaluated or pre-evaluation DENY, or (in a batch item) the
 * sidecar's no-decision DENY; `meta` are the members a batch item adds. Anything else, any member
 * more or less, a wrong type, another configKey, an ALLOW already expired: not allowed.
 */
function decision(o: Record<string, unknown>, asked: string, nowMs: number, status: number, decisionId: string | undefined, meta: readonly string[], header?: string): CheckResult {
  // A batch item says its source in its body; a single check in its header (only passed on, never trusted for anything).
  const source = meta.length > 0 ? o.source : header === 'cache' || header === 'upstream' ? header : undefined;
  if (o.decision === 'ALLOW') {
    if (!exactly(o, ['decision', 'configKey', 'validUntil', ...meta])) return unexpected('malformed', status, decisionId, 'an ALLOW with members other than decision, configKey, validUntil');
    if (typeof o.configKey !== 'string') return unexpected('malformed', status, decisionId, 'configKey is not a string');
    if (o.configKey !== asked) return unexpected('other_config_key', status, decisionId);
    const validUntil = o.validUntil;
    if (typeof validUntil !== 'number' || !Number.isSafeInteger(validUntil) || validUntil <= 0) return unexpected('malformed', status, decisionId, 'validUntil is not an integer (epoch ms)');
    if (meta.length > 0 && source !== 'cache' && source !== 'upstream') return unexpected('malformed', status, decisionId, 'an ALLOW item whose source is not cache or upstream');
    if (!(Number.isFinite(nowMs) && validUntil > nowMs)) return unexpected('expired', status, decisionId);
    const allowed = { allowed: true as const, kind: 'allow' as const, configKey: o.configKey, validUntil };
    return Object.freeze({ ...allowed, ...(typeof source === 'string' ? { source } : {}), ...(decisionId === undefined ? {} : { decisionId }) });
  }
  if (o.decision !== 'DENY') return unexpected('malformed', status, decisionId, 'decision is neither "ALLOW" nor "DENY"');
  if (exactly(o, ['decision', 'configKey', ...meta])) {
    if (typeof o.configKey !== 'string') return unexpected('malformed', status, decisionId, 'configKey is not a string');
    if (o.configKey !== asked) return unexpected('other_config_key', status, decisionId);
    return not('deny', 'evaluated', { status, decisionId });
  }
  if (exactly(o, ['decision', 'reason', ...meta])) {
    if (typeof o.reason !== 'string' || o.reason === '') return unexpected('malformed', status, decisionId, 'reason is not a string');
    return not('deny', o.reason, { status, decisionId });
  }
  if (meta.length > 0 && exactly(o, ['decision', 'error', ...meta]) && source === 'fail-closed') {
    return not('no_decision', typeof o.error === 'string' && CAUSE.test(o.error) ? o.error : 'unspecified', { status, decisionId });
  }
  return unexpected('malformed', status, decisionId, 'a DENY of no documented shape');
}

/** What a whole answer that is not a 200 means, for one check or for every item of a batch. */
function notOk(a: RawAnswer, decisionId: string | undefined): NotAllowed {
  const { status } = a;
  if (status === 503) {
    const o = jsonObject(a);
    const cause = typeof o === 'object' && exactly(o, ['decision', 'error']) && o.decision === 'DENY' && typeof o.error === 'string' && CAUSE.test(o.error) ? o.error : 'unspecified';
    return not('no_decision', cause, { status, decisionId });
  }
  if (status === 400) {
    const o = jsonObject(a);
    const field = typeof o === 'object' && typeof o.field === 'string' ? o.field.slice(0, 64) : undefined;
    return not('invalid_request', 'invalid_request', { status, decisionId, ...(field === undefined ? {} : { detail: `field ${field}` }) });
  }
  if (status >= 300 && status <= 399) return unexpected('redirect', status, decisionId);
  return unexpected('unexpected_status', status, decisionId);
}

/**
 * The answer to `POST /v1/authorization/check` for `asked`, received at `nowMs`. The only way to
 * `allowed: true` is a 200 whose body is exactly `{"decision":"ALLOW","configKey":<asked>,"validUntil":<integer > nowMs>}`
 * (JSON, UTF-8, no member twice).
 */
export function readCheckAnswer(a: RawAnswer, asked: CheckInput, nowMs: number): CheckResult {
  const decisionId = tokenOr(a.decisionId);
  if (a.status !== 200) return notOk(a, decisionId);
  const o = jsonObject(a);
  if (typeof o === 'string') return unexpected(o, a.status, decisionId);
  return decision(o, asked.configKey, nowMs, a.status, decisionId, [], a.source);
}

/**
 * The answer to `POST /sidecar/authorization/check-batch` for `asked`, one result per check in
 * order. A body that is not one JSON object with exactly `results`, or names a member twice
 * anywhere, or a `results` of another length than asked: no item is allowed. Otherwise each item
 * is read as a single check's body plus `source` and `decisionId`, for the configKey asked at its index.
 */
export function readBatchAnswer(a: RawAnswer, asked: readonly CheckInput[], nowMs: number): CheckResult[] {
  const all = (r: NotAllowed): CheckResult[] => asked.map(() => r);
  if (a.status !== 200) return all(notOk(a, undefined));
  const o = jsonObject(a);
  if (typeof o === 'string') return all(unexpected(o, a.status, undefined));
  const results = o.results;
  if (!exactly(o, ['results']) || !Array.isArray(results)) return all(unexpected('malformed', a.status, undefined, 'not {"results":[…]}'));
  if (results.length !== asked.length) return all(unexpected('malformed', a.status, undefined, `${results.length} results for ${asked.length} checks`));
  return asked.map((check, i) => {
    const item: unknown = results[i];
    if (!isObject(item)) return unexpected('missing_item', a.status, undefined);
    const decisionId = tokenOr(item.decisionId);
    if (decisionId === undefined) return unexpected('malformed', a.status, undefined, 'an item without a decisionId');
    return decision(item, check.configKey, nowMs, a.status, decisionId, ['source', 'decisionId']);
  });
}
