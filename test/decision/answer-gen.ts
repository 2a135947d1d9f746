/**
 * A generator of upstream answers to a check that records what it did to each one. It starts from a
 * valid ALLOW and applies benign variations (member order, spacing, extra members, a `Date` header
 * behind us or absent or unreadable) and zero or more faults, each of which alone takes the right to
 * ALLOW away under the contract (duplicated members, expiry by either clock, a `Date` one hour ahead,
 * another configKey, a wrong type, a reason, a status other than 200, not an object, …).
 *
 * The oracle is therefore the record, not a second parser: ALLOW is expected exactly when no fault
 * was applied.
 */
import fc from 'fast-check';

export const FAULTS = [
  'status',
  'dup_decision',
  'dup_config_key',
  'dup_valid_until',
  'dup_escaped_name',
  'dup_other_member',
  'dup_nested',
  'expired_local',
  'date_one_hour_ahead',
  'other_config_key',
  'decision_value',
  'drop_decision',
  'drop_config_key',
  'drop_valid_until',
  'valid_until_type',
  'reason',
  'not_an_object',
  'truncated',
  'garbage',
] as const;
export type Fault = (typeof FAULTS)[number];

export interface GeneratedAnswer {
  readonly status: number;
  /** The `Date` header sent, if any. */
  readonly date: string | undefined;
  readonly body: string;
  /** Faults applied; empty means a valid ALLOW. */
  readonly faults: readonly Fault[];
  /** Benign variations applied (for the failure report). */
  readonly benign: readonly string[];
  /** The ALLOW's validUntil before faults (epoch ms). */
  readonly validUntil: number;
}

interface Choice {
  faults: Fault[];
  order: number[];
  spaced: boolean;
  extra: boolean;
  dateKind: 'none' | 'same' | 'minus_1h' | 'minus_1m' | 'unreadable';
  validForMs: number;
  status: number;
  expiredByMs: number;
  decisionValue: string;
  validUntilText: string;
  garbage: string;
  cut: number;
}

/** Answers for a check of `configKey`, relative to `now()` read when a case is built. */
export function answers(configKey: string, now: () => number): fc.Arbitrary<GeneratedAnswer> {
  const choice: fc.Arbitrary<Choice> = fc.record({
    faults: fc.oneof({ weight: 2, arbitrary: fc.constant([] as Fault[]) }, { weight: 5, arbitrary: fc.uniqueArray(fc.constantFrom(...FAULTS), { minLength: 1, maxLength: 2 }) }),
    order: fc.shuffledSubarray([0, 1, 2], { minLength: 3, maxLength: 3 }),
    spaced: fc.boolean(),
    extra: fc.boolean(),
    dateKind: fc.constantFrom('none', 'same', 'minus_1h', 'minus_1m', 'unreadable'),
    // At least a minute: a valid ALLOW must neither expire in flight nor die in the cache before the
    // end-to-end property asks again, however slow the machine (5 s was not, under load).
    validForMs: fc.integer({ min: 60_000, max: 600_000 }),
    status: fc.constantFrom(201, 202, 203, 206, 226, 204, 301, 400, 404, 429, 500, 503),
    expiredByMs: fc.integer({ min: 0, max: 3_600_000 }),
    decisionValue: fc.constantFrom('"DENY"', '"allow"', '"ALLOW "', 'true', 'null', '["ALLOW"]'),
    validUntilText: fc.constantFrom('1e400', 'VU.5', 'VU.25', '"VU"', 'null', '-1', '{"at":VU}'),
    garbage: fc.oneof(fc.json(), fc.string()),
    cut: fc.integer({ min: 1, max: 40 }),
  });
  return choice.map((c) => build(c, configKey, now()));
}

function build(c: Choice, configKey: string, nowMs: number): GeneratedAnswer {
  const has = (f: Fault): boolean => c.faults.includes(f);
  const benign: string[] = [];
  const validUntil = nowMs + c.validForMs;
  const vu = has('expired_local') ? nowMs - c.expiredByMs : validUntil;
  const q = JSON.stringify;

  const members: string[] = [];
  const decision = has('decision_value') ? c.decisionValue : q('ALLOW');
  const key = has('other_config_key') ? q(`${configKey}-other`) : q(configKey);
  const until = has('valid_until_type') ? c.validUntilText.replace('VU', String(vu)) : String(vu);
  const core = [
    has('drop_decision') ? [] : [`"decision":${decision}`],
    has('drop_config_key') ? [] : [`"configKey":${key}`],
    has('drop_valid_until') ? [] : [`"validUntil":${until}`],
  ];
  // A duplicate goes before the real member: JSON.parse would keep the real one.
  if (has('dup_decision')) core[0]!.unshift('"decision":"DENY"');
  if (has('dup_escaped_name')) core[0]!.unshift('"decisio\\u006e":"DENY"');
  if (has('dup_config_key')) core[1]!.unshift(`"configKey":${q(`${configKey}-other`)}`);
  if (has('dup_valid_until')) core[2]!.unshift('"validUntil":1');
  for (const i of c.order) members.push(...core[i]!);
  if (c.order.join() !== '0,1,2') benign.push('member order');
  if (c.extra) {
    members.push('"meta":{"trace":"t-1","hops":[1,{"n":2}]}');
    benign.push('extra member');
  }
  if (has('dup_other_member')) members.push('"note":1', '"note":2');
  if (has('dup_nested')) members.push('"ctx":{"a":1,"b":[{"c":1,"c":2}]}');
  if (has('reason')) members.push('"reason":"customer_not_found"');

  const sep = c.spaced ? ',\n  ' : ',';
  if (c.spaced) benign.push('spacing');
  let body = c.spaced ? `{\n  ${members.join(sep)}\n}` : `{${members.join(sep)}}`;
  if (has('not_an_object')) body = `[${body}]`;
  if (has('truncated')) body = body.slice(0, Math.max(0, body.length - c.cut));
  if (has('garbage')) body = `${c.garbage}`.startsWith('{') ? `[${c.garbage}]` : c.garbage;

  let date: string | undefined;
  if (has('date_one_hour_ahead')) date = new Date(nowMs + 3_600_000).toUTCString();
  else {
    benign.push(`date ${c.dateKind}`);
    if (c.dateKind === 'same') date = new Date(nowMs).toUTCString();
    else if (c.dateKind === 'minus_1h') date = new Date(nowMs - 3_600_000).toUTCString();
    else if (c.dateKind === 'minus_1m') date = new Date(nowMs - 60_000).toUTCString();
    else if (c.dateKind === 'unreadable') date = 'yesterday-ish';
  }
  return { status: has('status') ? c.status : 200, date, body, faults: c.faults, benign, validUntil };
}
