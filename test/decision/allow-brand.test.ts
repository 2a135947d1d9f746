/**
 * The one promise as a type: an ALLOW is made by the fail-closed parser and by nothing else.
 *
 * Each `@ts-expect-error` below is a compile error only while AllowedDecision and AllowAnswer are
 * nominal (their private `minted` brands and private constructors, src/decision/parse-response.ts
 * and allow-answer.ts). Made structural, `npm run typecheck` fails on this file with "Unused
 * '@ts-expect-error' directive": a literal ALLOW would compile and be served. The same lines also
 * run, to show that what is forged past the compiler is still no ALLOW at run time.
 */
import { describe, expect, it } from 'vitest';
import { AllowAnswer, AllowCache, AllowedDecision, cacheKey, decisionAnswer, type Answer } from '../../src/decision/index.js';
import { allowAnswerFor, allowedFor } from '../helpers/allowed.js';

const UNTIL = 1_900_000_000_000;
const BODY = `{"decision":"ALLOW","configKey":"k","validUntil":${UNTIL}}`;

describe('an ALLOW only the parser can make', () => {
  it('a literal ALLOW where an Answer is expected does not compile', () => {
    // @ts-expect-error a literal ALLOW is not an Answer (not an AllowAnswer, and a DenyAnswer says deny)
    const literal: Answer = { status: 200, decision: 'allow', source: 'upstream', body: BODY, bodyBytes: BODY.length, validUntil: UNTIL, validUntilText: String(UNTIL) };
    expect(literal).not.toBeInstanceOf(AllowAnswer);
    // @ts-expect-error nor where an AllowAnswer is expected
    const typed: AllowAnswer = { status: 200, decision: 'allow', source: 'cache', body: BODY, bodyBytes: BODY.length, validUntil: UNTIL, validUntilText: String(UNTIL) };
    expect(typed).not.toBeInstanceOf(AllowAnswer);
  });

  it('a DENY answer cannot carry an ALLOW body', () => {
    // @ts-expect-error a DENY body starts {"decision":"DENY",
    const sneaky: Answer = { status: 200, decision: 'deny', source: 'upstream', body: BODY, bodyBytes: BODY.length };
    expect(sneaky.decision).toBe('deny');
  });

  it('a literal where an AllowedDecision is expected does not compile, nor does its constructor or its factory without the parser\'s key', () => {
    // @ts-expect-error a literal is not an AllowedDecision
    const literal: AllowedDecision = { kind: 'allow', configKey: 'k', validUntil: UNTIL, validUntilText: String(UNTIL) };
    expect(literal).not.toBeInstanceOf(AllowedDecision);
    // @ts-expect-error the constructor is private
    expect(() => new AllowedDecision(Symbol('forged'), 'k', String(UNTIL))).toThrow(TypeError);
    // @ts-expect-error the factory takes the parser's own key, which no other module can name
    expect(() => AllowedDecision.mint(Symbol('forged'), 'k', UNTIL)).toThrow(TypeError);
  });

  it('what is forged past the compiler makes no ALLOW answer and enters no cache', () => {
    const forged = { kind: 'allow', configKey: 'k', validUntil: UNTIL, validUntilText: String(UNTIL) } as const;
    // @ts-expect-error an ALLOW answer is made from an AllowedDecision only
    expect(() => AllowAnswer.of(forged, 'upstream')).toThrow(TypeError);
    // @ts-expect-error the service's decisions: an ALLOW among them is the parser's
    expect(() => decisionAnswer(forged, 'upstream')).toThrow(TypeError);
    // @ts-expect-error the constructor is private
    expect(() => new AllowAnswer(Symbol('forged'), 'upstream', BODY, BODY.length, String(UNTIL))).toThrow(TypeError);
    const cache = new AllowCache({ maxEntries: 10, safetyMarginMs: 0, maxTtlMs: 3_600_000 }, () => UNTIL - 60_000, () => 0);
    const key = cacheKey({ userReference: 'u', configKey: 'k' });
    // @ts-expect-error the cache stores the parser's ALLOWs and nothing else
    expect(cache.setAllow(key, 'u', forged, UNTIL - 1_000, cache.generation)).toBe(false);
    expect(cache.lookup(key)).toBeUndefined();
  });

  it("the parser's ALLOW makes the answer, byte for byte the service's shape, and the cache serves it", () => {
    const allowed = allowedFor('k', UNTIL);
    const answer = allowAnswerFor('k', UNTIL, 'upstream');
    expect(answer).toBeInstanceOf(AllowAnswer);
    expect(answer.body).toBe(BODY);
    expect(answer.bodyBytes).toBe(Buffer.byteLength(BODY));
    expect(answer.validUntil).toBe(UNTIL);
    const cache = new AllowCache({ maxEntries: 10, safetyMarginMs: 0, maxTtlMs: 3_600_000 }, () => UNTIL - 60_000, () => 0);
    const key = cacheKey({ userReference: 'u', configKey: 'k' });
    expect(cache.setAllow(key, 'u', allowed, UNTIL - 1_000, cache.generation)).toBe(true);
    const hit = cache.lookup(key)!.answer;
    expect(hit).toBeInstanceOf(AllowAnswer);
    expect([hit.source, hit.body, hit.bodyBytes, hit.validUntil]).toEqual(['cache', BODY, Buffer.byteLength(BODY), UNTIL]);
  });
});
