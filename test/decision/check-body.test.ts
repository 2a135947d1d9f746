import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { cacheKey, parseCheckBody, parseCheckRequest, readCompactBody, type CheckRequest } from '../../src/decision/index.js';

/**
 * The check route reads its body's bytes straight when they have the compact shape clients send,
 * and leaves everything else to JSON.parse. The reference here is JSON.parse over the UTF-8
 * decoding (parseCheckRequest), as the route read every body before: the two must never differ.
 */
const reference = (b: Buffer) => parseCheckRequest(b.toString('utf8'));

/** Strings as a client may send them: ASCII, quotes, backslashes, controls, astral and lone surrogates, empty and over-long. */
const field = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 20 }),
  fc.constantFrom('', '"', '\\', 'a"b', 'a\\b', '\u0000', '\u001f', '\u007f', 'é', '\u2028', '😀', '\ud800', 'x'.repeat(1024), 'x'.repeat(1025)),
);

describe('parseCheckBody', () => {
  it('reads the compact body on the fast path, either key first', () => {
    expect(readCompactBody(Buffer.from('{"userReference":"alice","configKey":"marketing-email"}'))).toEqual({ userReference: 'alice', configKey: 'marketing-email' });
    expect(readCompactBody(Buffer.from('{"configKey":"marketing-email","userReference":"alice"}'))).toEqual({ userReference: 'alice', configKey: 'marketing-email' });
  });

  it('leaves to JSON.parse every body whose bytes are not the string as it is', () => {
    for (const body of [
      '{"userReference": "alice","configKey":"k"}', // whitespace
      '{"userReference":"alice","configKey":"k"} ', // trailing whitespace
      '\ufeff{"userReference":"alice","configKey":"k"}', // BOM
      '{"userReference":"al\\u0069ce","configKey":"k"}', // an escape
      '{"userReference":"al\\"ice","configKey":"k"}',
      '{"userReference":"élise","configKey":"k"}', // non-ASCII
      '{"userReference":"a\u007fb","configKey":"k"}', // DEL
      '{"userReference":"a\tb","configKey":"k"}', // a raw control character
      '{"userReference":"alice","configKey":"k","extra":1}',
      '{"userReference":"alice","userReference":"bob"}',
      '{"userReference":"alice","configKey":"k"}}',
      '{"userReference":"alice","configKey":"k"',
      '{"userReference":"alice"}',
      '{"userReference":"alice","configKey":k}',
    ]) {
      expect(readCompactBody(Buffer.from(body)), body).toBeUndefined();
      expect(parseCheckBody(Buffer.from(body)), body).toEqual(reference(Buffer.from(body)));
    }
  });

  it('refuses what JSON.parse refuses, naming the same field', () => {
    for (const body of ['{"userReference":"","configKey":"k"}', `{"userReference":"u","configKey":"${'k'.repeat(1025)}"}`, '{"configKey":"k","userReference":""}']) {
      expect(readCompactBody(Buffer.from(body)), body).toEqual(reference(Buffer.from(body)));
      expect(readCompactBody(Buffer.from(body)), body).toMatchObject({ field: expect.any(String) });
    }
  });

  it("refuses a body with a repeated member, naming the field when it is one of the request's", () => {
    // JSON.parse would keep "allowed"; a reader that keeps the first member would mean "denied".
    expect(parseCheckBody(Buffer.from('{"userReference":"u","configKey":"denied","configKey":"allowed"}'))).toEqual({
      field: 'configKey',
      detail: 'member "configKey" appears more than once; the request is ambiguous',
    });
    expect(parseCheckBody(Buffer.from('{"userReference":"u","userReference":"v","configKey":"k"}'))).toMatchObject({ field: 'userReference' });
    // An escape that spells the same name is the same member.
    expect(parseCheckBody(Buffer.from('{"userReference":"u","configKey":"a","config\\u004bey":"b"}'))).toMatchObject({ field: 'configKey' });
    expect(parseCheckBody(Buffer.from('{"userReference":"u","configKey":"k","x":1,"x":1}'))).toMatchObject({ field: 'body' });
    expect(parseCheckBody(Buffer.from('{"userReference":"u","configKey":"k","meta":{"configKey":1,"configKey":2}}'))).toEqual({
      field: 'body',
      detail: 'member "configKey" appears more than once in one object; the request is ambiguous',
    });
    // The same name in different objects is no repetition.
    expect(parseCheckBody(Buffer.from('{"userReference":"u","configKey":"k","meta":{"configKey":"k"}}'))).toEqual({ userReference: 'u', configKey: 'k' });
  });

  it('answers every JSON body as JSON.parse does (both key orders, any strings)', () => {
    fc.assert(
      fc.property(field, field, fc.boolean(), (userReference, configKey, userFirst) => {
        const body = Buffer.from(userFirst ? JSON.stringify({ userReference, configKey }) : JSON.stringify({ configKey, userReference }));
        expect(parseCheckBody(body)).toEqual(reference(body));
      }),
      { numRuns: 2000 },
    );
  });

  it('answers every damaged body as JSON.parse does (a byte inserted, removed or replaced)', () => {
    const canonical = fc.tuple(fc.string({ maxLength: 12 }), fc.string({ maxLength: 12 }), fc.boolean()).map(([u, k, userFirst]) =>
      Buffer.from(userFirst ? JSON.stringify({ userReference: u, configKey: k }) : JSON.stringify({ configKey: k, userReference: u })),
    );
    fc.assert(
      fc.property(canonical, fc.nat(), fc.integer({ min: 0, max: 255 }), fc.constantFrom('insert', 'remove', 'replace'), (b, at, byte, how) => {
        const i = at % (b.length + 1);
        const bytes = [...b];
        if (how === 'insert') bytes.splice(i, 0, byte);
        else if (how === 'remove') bytes.splice(i, 1);
        else bytes[Math.min(i, bytes.length - 1)] = byte;
        const damaged = Buffer.from(bytes);
        expect(parseCheckBody(damaged)).toEqual(reference(damaged));
      }),
      { numRuns: 5000 },
    );
  });

  it('gives the cache key made from the bytes only for the request it read last, equal to the key of its fields', () => {
    // The key as the cache builds it from any request's fields, written out here independently.
    const byFields = (r: CheckRequest): string => `${r.userReference.length}:${r.userReference}${r.configKey}`;
    fc.assert(
      fc.property(field, field, fc.boolean(), field, field, (userReference, configKey, userFirst, u2, k2) => {
        const body = Buffer.from(userFirst ? JSON.stringify({ userReference, configKey }) : JSON.stringify({ configKey, userReference }));
        const r = parseCheckBody(body);
        if ('field' in r) return;
        expect(cacheKey(r)).toBe(byFields(r));
        // A request with the same fields made otherwise, and the one read before the last.
        expect(cacheKey({ ...r })).toBe(byFields(r));
        const next = parseCheckBody(Buffer.from(JSON.stringify({ userReference: u2, configKey: k2 })));
        expect(cacheKey(r)).toBe(byFields(r));
        if (!('field' in next)) expect(cacheKey(next)).toBe(byFields(next));
      }),
      { numRuns: 3000 },
    );
  });

  it('keeps users apart whose reference ends where another begins (the length prefix), on the fast path', () => {
    const a = readCompactBody(Buffer.from('{"userReference":"ab","configKey":"c"}')) as CheckRequest;
    const keyA = cacheKey(a);
    const b = readCompactBody(Buffer.from('{"configKey":"bc","userReference":"a"}')) as CheckRequest;
    expect([keyA, cacheKey(b)]).toEqual(['2:abc', '1:abc']);
    expect([a, b]).toEqual([{ userReference: 'ab', configKey: 'c' }, { userReference: 'a', configKey: 'bc' }]);
  });
});
