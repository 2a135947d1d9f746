import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AllowedDecision, DecisionError, parseCheckResponse } from '../../src/decision/index.js';
import { answers, FAULTS } from './answer-gen.js';

const NOW = 1_800_000_000_000;
const KEY = 'flow-marketing';

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
    return undefined;
  } catch (err) {
    return err instanceof DecisionError ? err.code : 'NOT_A_DECISION_ERROR';
  }
}

const parse = (status: number, body: unknown, date?: string) =>
  parseCheckResponse({ status, date, body: typeof body === 'string' ? body : JSON.stringify(body) }, KEY, NOW);

describe('parseCheckResponse: the three shapes of the document', () => {
  it('accepts a well-formed ALLOW for the key asked', () => {
    const d = parse(200, { decision: 'ALLOW', configKey: KEY, validUntil: NOW + 60_000 }).decision;
    expect(d).toBeInstanceOf(AllowedDecision);
    if (!(d instanceof AllowedDecision)) return;
    expect({ kind: d.kind, configKey: d.configKey, validUntil: d.validUntil }).toEqual({
      kind: 'allow',
      configKey: KEY,
      validUntil: NOW + 60_000,
    });
  });

  it('keeps an evaluated denial and a pre-evaluation denial in their shapes', () => {
    expect(parse(200, { decision: 'DENY', configKey: KEY }).decision).toEqual({ kind: 'evaluated_denial', configKey: KEY });
    expect(parse(200, { decision: 'DENY', reason: 'ambiguous_config' }).decision).toEqual({
      kind: 'pre_evaluation_denial',
      reason: 'ambiguous_config',
    });
  });

  it('reads the service clock from the Date header', () => {
    const date = new Date(NOW + 30_000).toUTCString();
    expect(parse(200, { decision: 'ALLOW', configKey: KEY, validUntil: NOW + 60_000 }, date).serviceNowMs).toBe(
      Math.floor((NOW + 30_000) / 1000) * 1000,
    );
  });
});

describe('parseCheckResponse: everything else fails closed with a stable code', () => {
  const allow = { decision: 'ALLOW', configKey: KEY, validUntil: NOW + 60_000 };
  it.each([
    ['500', 500, allow, 'ERR_UPSTREAM_STATUS_5XX'],
    ['503', 503, allow, 'ERR_UPSTREAM_STATUS_5XX'],
    ['401', 401, allow, 'ERR_UPSTREAM_STATUS_4XX'],
    ['429', 429, allow, 'ERR_UPSTREAM_STATUS_4XX'],
    ['201', 201, allow, 'ERR_UPSTREAM_STATUS_OTHER'],
    ['204', 204, allow, 'ERR_UPSTREAM_STATUS_OTHER'],
    ['302', 302, allow, 'ERR_UPSTREAM_STATUS_OTHER'],
    ['not JSON', 200, '{"decision":"ALLOW"', 'ERR_UPSTREAM_MALFORMED'],
    ['empty body', 200, '', 'ERR_UPSTREAM_MALFORMED'],
    ['JSON array', 200, [allow], 'ERR_UPSTREAM_MALFORMED'],
    ['JSON null', 200, 'null', 'ERR_UPSTREAM_MALFORMED'],
    ['JSON string', 200, '"ALLOW"', 'ERR_UPSTREAM_MALFORMED'],
    ['lowercase allow', 200, { ...allow, decision: 'allow' }, 'ERR_UPSTREAM_MALFORMED'],
    ['decision true', 200, { ...allow, decision: true }, 'ERR_UPSTREAM_MALFORMED'],
    ['no decision', 200, { configKey: KEY, validUntil: NOW + 1 }, 'ERR_UPSTREAM_MALFORMED'],
    ['ALLOW without configKey', 200, { decision: 'ALLOW', validUntil: NOW + 60_000 }, 'ERR_UPSTREAM_MALFORMED'],
    ['ALLOW for another key', 200, { ...allow, configKey: 'other' }, 'ERR_UPSTREAM_CONTRADICTORY'],
    ['ALLOW with a reason', 200, { ...allow, reason: 'customer_not_found' }, 'ERR_UPSTREAM_CONTRADICTORY'],
    ['ALLOW with reason null', 200, { ...allow, reason: null }, 'ERR_UPSTREAM_CONTRADICTORY'],
    ['ALLOW without validUntil', 200, { decision: 'ALLOW', configKey: KEY }, 'ERR_UPSTREAM_MALFORMED'],
    ['string validUntil', 200, { ...allow, validUntil: String(NOW + 60_000) }, 'ERR_UPSTREAM_MALFORMED'],
    ['float validUntil', 200, { ...allow, validUntil: NOW + 60_000.5 }, 'ERR_UPSTREAM_MALFORMED'],
    ['huge validUntil', 200, '{"decision":"ALLOW","configKey":"flow-marketing","validUntil":1e400}', 'ERR_UPSTREAM_MALFORMED'],
    ['expired validUntil', 200, { ...allow, validUntil: NOW - 1 }, 'ERR_UPSTREAM_EXPIRED'],
    ['validUntil exactly now', 200, { ...allow, validUntil: NOW }, 'ERR_UPSTREAM_EXPIRED'],
    ['DENY with reason and configKey', 200, { decision: 'DENY', configKey: KEY, reason: 'ambiguous_config' }, 'ERR_UPSTREAM_CONTRADICTORY'],
    ['DENY for another key', 200, { decision: 'DENY', configKey: 'other' }, 'ERR_UPSTREAM_CONTRADICTORY'],
    ['bare DENY', 200, { decision: 'DENY' }, 'ERR_UPSTREAM_MALFORMED'],
    ['DENY with numeric reason', 200, { decision: 'DENY', reason: 7 }, 'ERR_UPSTREAM_MALFORMED'],
  ])('%s → %s', (_name, status, body, code) => {
    expect(codeOf(() => parse(status as number, body))).toBe(code);
  });

  it('an ALLOW the service clock says has expired is expired, whatever the local clock says', () => {
    const date = new Date(NOW + 120_000).toUTCString();
    expect(codeOf(() => parse(200, { ...allow, validUntil: NOW + 60_000 }, date))).toBe('ERR_UPSTREAM_EXPIRED');
  });
});

/** The oracle: the rule of the contract, written independently of the parser. */
function isWellFormedAllow(status: number, body: string, date: string | undefined): boolean {
  if (status !== 200) return false;
  let v: unknown;
  try {
    v = JSON.parse(body);
  } catch {
    return false;
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false;
  const o = v as Record<string, unknown>;
  const serviceNow = date === undefined ? Number.NaN : Date.parse(date);
  return (
    o.decision === 'ALLOW' &&
    o.configKey === KEY &&
    !('reason' in o) &&
    Number.isSafeInteger(o.validUntil) &&
    (o.validUntil as number) > NOW &&
    !(Number.isFinite(serviceNow) && (o.validUntil as number) <= serviceNow)
  );
}

const jsonValue = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer(),
  fc.double(),
  fc.string(),
  fc.constantFrom('ALLOW', 'DENY', 'allow', KEY, `${KEY} `, NOW + 5000, NOW, NOW - 1, `${NOW + 5000}`),
);
const nearAllow = fc
  .record(
    {
      decision: fc.oneof(fc.constantFrom('ALLOW', 'DENY', 'Allow', ' ALLOW'), jsonValue),
      configKey: fc.oneof(fc.constantFrom(KEY, 'other', KEY.toUpperCase(), ''), jsonValue),
      validUntil: fc.oneof(fc.integer({ min: NOW - 10_000, max: NOW + 10_000 }), fc.double(), jsonValue),
      reason: fc.oneof(fc.constantFrom('customer_not_found', ''), jsonValue),
      extra: jsonValue,
    },
    { requiredKeys: [] },
  )
  .map((o) => JSON.stringify(o));
const bodies = fc.oneof(nearAllow, fc.json(), fc.string(), fc.constant(JSON.stringify({ decision: 'ALLOW', configKey: KEY, validUntil: NOW + 60_000 })));
const statuses = fc.oneof(fc.constant(200), fc.integer({ min: 100, max: 599 }));
const dates = fc.oneof(
  fc.constant(undefined),
  fc.integer({ min: -120_000, max: 120_000 }).map((d) => new Date(NOW + d).toUTCString()),
  fc.string(),
);

describe('parseCheckResponse: property', () => {
  it('nothing but a well-formed, matching, unexpired ALLOW ever yields allow', () => {
    fc.assert(
      fc.property(statuses, bodies, dates, (status, body, date) => {
        let kind: string;
        try {
          kind = parseCheckResponse({ status, body, date }, KEY, NOW).decision.kind;
        } catch (err) {
          // Whatever fails must fail as a DecisionError, which the HTTP layer turns into 503 DENY.
          expect(err).toBeInstanceOf(DecisionError);
          kind = 'error';
        }
        expect(kind === 'allow').toBe(isWellFormedAllow(status, body, date));
      }),
      { numRuns: 5000 },
    );
  });

  it('the property has teeth: the generators do produce ALLOWs', () => {
    let allows = 0;
    fc.assert(
      fc.property(statuses, bodies, dates, (status, body, date) => {
        if (isWellFormedAllow(status, body, date)) allows++;
      }),
      { numRuns: 2000, seed: 42 },
    );
    expect(allows).toBeGreaterThan(20);
  });
});

describe('parseCheckResponse: duplicated members are no decision', () => {
  const future = NOW + 60_000;
  it.each([
    ['decision DENY then ALLOW', `{"decision":"DENY","decision":"ALLOW","configKey":"${KEY}","validUntil":${future}}`],
    ['decision ALLOW then DENY', `{"decision":"ALLOW","decision":"DENY","configKey":"${KEY}"}`],
    ['configKey other then asked', `{"decision":"ALLOW","configKey":"other","configKey":"${KEY}","validUntil":${future}}`],
    ['validUntil 1 then future', `{"decision":"ALLOW","configKey":"${KEY}","validUntil":1,"validUntil":${future}}`],
    ['an escaped spelling of decision', `{"decisio\\u006e":"DENY","decision":"ALLOW","configKey":"${KEY}","validUntil":${future}}`],
    ['an unknown member twice', `{"decision":"ALLOW","configKey":"${KEY}","validUntil":${future},"x":1,"x":1}`],
    ['a duplicate nested in an array', `{"decision":"ALLOW","configKey":"${KEY}","validUntil":${future},"x":[{"a":1,"a":2}]}`],
    ['a DENY with reason twice', '{"decision":"DENY","reason":"customer_not_found","reason":"ambiguous_config"}'],
  ])('%s → ERR_UPSTREAM_CONTRADICTORY', (_name, body) => {
    expect(codeOf(() => parse(200, body))).toBe('ERR_UPSTREAM_CONTRADICTORY');
  });

  it('the same name in sibling or nested objects is not a duplicate', () => {
    const body = `{"decision":"ALLOW","configKey":"${KEY}","validUntil":${future},"a":{"decision":1,"b":{"decision":2}},"c":[{"decision":3},{"decision":4}]}`;
    expect(parse(200, body).decision.kind).toBe('allow');
  });
});

describe('parseCheckResponse: property over recorded answers (oracle: the faults the generator applied)', () => {
  it('ALLOW exactly when no fault was applied', () => {
    let allows = 0;
    fc.assert(
      fc.property(answers(KEY, () => NOW), (a) => {
        let kind: string;
        try {
          kind = parseCheckResponse({ status: a.status, body: a.body, date: a.date }, KEY, NOW).decision.kind;
        } catch (err) {
          expect(err).toBeInstanceOf(DecisionError);
          kind = 'error';
        }
        if (kind === 'allow') allows++;
        expect(kind === 'allow', `faults ${a.faults.join(', ') || 'none'}; ${a.benign.join(', ')}; body ${a.body}`).toBe(a.faults.length === 0);
      }),
      { numRuns: 3000 },
    );
    expect(allows).toBeGreaterThan(100);
  });

  it('every fault is generated', () => {
    const seen = new Set<string>();
    fc.assert(fc.property(answers(KEY, () => NOW), (a) => void a.faults.forEach((f) => seen.add(f))), { numRuns: 1000, seed: 7 });
    expect([...seen].sort()).toEqual([...FAULTS].sort());
  });
});
