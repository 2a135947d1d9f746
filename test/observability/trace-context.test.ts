import { parseTraceParent } from '@opentelemetry/core';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { passedOn, rawTraceContext, validTraceparent, validTracestate } from '../../src/observability/trace-context.js';

const TRACE = '0af7651916cd43dd8448eb211c80319c';
const SPAN = 'b7ad6b7169203331';
const VALID = `00-${TRACE}-${SPAN}-01`;

// Only a version-00 header of exactly 55 characters is passed on: a later version is read by its
// first four fields and passed on as version 00 (it used to go on as it came, a 15 KB suffix
// included, to the service).
describe('W3C traceparent: what passes on as it came, what is dropped', () => {
  it.each([
    ['a later version, with more after the flags', `01-${TRACE}-${SPAN}-01-what-comes-next`, `00-${TRACE}-${SPAN}-01`],
    ['a later version, four fields', `cc-${TRACE}-${SPAN}-09`, `00-${TRACE}-${SPAN}-09`],
    ['a later version, a 15 KB suffix', `01-${TRACE}-${SPAN}-01-${'x'.repeat(15_000)}`, `00-${TRACE}-${SPAN}-01`],
    ['a later version, no dash after the flags', `01-${TRACE}-${SPAN}-01x`, null],
  ])('%s: passed on as version 00', (_name, value, expected) => {
    expect(validTraceparent(value)).toBe(expected);
  });

  it.each([
    ['version 00, sampled', VALID, true],
    ['version 00, not sampled', `00-${TRACE}-${SPAN}-00`, true],
    ['version ff', `ff-${TRACE}-${SPAN}-01`, false],
    ['version 00 with a fifth field', `00-${TRACE}-${SPAN}-01-extra`, false],
    ['all-zero trace id', `00-${'0'.repeat(32)}-${SPAN}-01`, false],
    ['all-zero parent id', `00-${TRACE}-${'0'.repeat(16)}-01`, false],
    ['upper-case hex', `00-${TRACE.toUpperCase()}-${SPAN}-01`, false],
    ['a short trace id', `00-${TRACE.slice(1)}-${SPAN}-01`, false],
    ['a long parent id', `00-${TRACE}-${SPAN}0-01`, false],
    ['one-digit flags', `00-${TRACE}-${SPAN}-1`, false],
    ['a space inside', `00-${TRACE} -${SPAN}-01`, false],
    ['empty (a repeated header)', '', false],
    ['garbage', 'garbage', false],
  ])('%s', (_name, value, valid) => {
    expect(validTraceparent(value)).toBe(valid ? value : null);
  });

  it('absent is absent', () => {
    expect(validTraceparent(undefined)).toBeNull();
  });

  it('property: anything accepted is version 00 of exactly 55 characters, the header itself when it was one, and OpenTelemetry\'s own W3C parser reads the same ids from it', () => {
    const hex = (n: number) => fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: n, maxLength: n });
    const candidate = fc.oneof(
      fc.string(),
      fc.tuple(hex(2), hex(32), hex(16), hex(2), fc.option(fc.string({ maxLength: 8 }))).map(([v, t, s, f, rest]) => `${v}-${t}-${s}-${f}${rest === null ? '' : `-${rest}`}`),
    );
    fc.assert(
      fc.property(candidate, (value) => {
        const ours = validTraceparent(value);
        if (ours === null) return;
        expect(ours).toHaveLength(55);
        expect(ours).toBe(value.startsWith('00-') ? value : `00${value.slice(2, 55)}`);
        const theirs = parseTraceParent(value);
        expect(theirs).not.toBeNull();
        expect(value.split('-').slice(1, 3)).toEqual([theirs!.traceId, theirs!.spanId]);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('tracestate', () => {
  it.each([
    ['one member', 'shop=1', true],
    ['several members', 'shop=1,rojo=00f067aa0ba902b7', true],
    ['512 characters', `a=${'x'.repeat(254)},b=${'y'.repeat(253)}`, true],
    ['513 characters', `a=${'x'.repeat(254)},b=${'y'.repeat(254)}`, false],
    ['a value of 257 characters', `a=${'x'.repeat(257)}`, false],
    ['32 members', Array.from({ length: 32 }, (_, i) => `k${i}=1`).join(','), true],
    ['33 members', Array.from({ length: 33 }, (_, i) => `k${i}=1`).join(','), false],
    ['a key in upper case', 'Shop=1', false],
    ['no value separator', 'shop', false],
    ['a tenant key', 'tenant@vendor=1', true],
    ['blank', '  ', false],
    ['a control character', 'shop=1\u0001', false],
    ['non-ASCII', 'shop=ö', false],
  ])('%s', (_name, value, valid) => {
    expect(validTracestate(value)).toBe(valid ? value : null);
  });
});

describe('reading the headers', () => {
  it.each([
    ['none', ['content-type', 'application/json'], { traceparent: undefined, tracestate: undefined }],
    ['any case', ['TraceParent', VALID, 'TRACESTATE', 'a=1'], { traceparent: VALID, tracestate: 'a=1' }],
    ['a repeated traceparent is none', ['traceparent', VALID, 'traceparent', VALID], { traceparent: '', tracestate: undefined }],
    ['several tracestate fields are one list', ['tracestate', 'a=1', 'traceparent', VALID, 'tracestate', 'b=2'], { traceparent: VALID, tracestate: 'a=1,b=2' }],
  ])('%s', (_name, raw, expected) => {
    expect(rawTraceContext(raw)).toStrictEqual(expected);
  });

  it('spans off: what goes on to the service', () => {
    expect(passedOn(VALID, 'shop=1')).toEqual(['traceparent', VALID, 'tracestate', 'shop=1']);
    expect(passedOn(VALID, undefined)).toEqual(['traceparent', VALID]);
    expect(passedOn(VALID, 'ö=1')).toEqual(['traceparent', VALID]);
    // no valid traceparent: nothing, not even the tracestate
    expect(passedOn('', 'shop=1')).toEqual([]);
    expect(passedOn(`ff-${TRACE}-${SPAN}-01`, 'shop=1')).toEqual([]);
    expect(passedOn(undefined, 'shop=1')).toEqual([]);
  });
});
