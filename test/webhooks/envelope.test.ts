import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseEnvelope } from '../../src/webhooks/index.js';

const valid = { id: 'evt_1', sequence: 7, type: 'x.y', occurredAt: 1767225590000, data: { a: 1 } };

describe('parseEnvelope', () => {
  it('accepts a valid envelope, unknown type included', () => {
    expect(parseEnvelope(Buffer.from(JSON.stringify(valid)))).toMatchObject({ ok: true, envelope: valid });
  });

  it.each([
    ['not JSON', '{"id":'],
    ['array', '[]'],
    ['null', 'null'],
    ['string', '"x"'],
    ['id missing', JSON.stringify({ ...valid, id: undefined })],
    ['id number', JSON.stringify({ ...valid, id: 1 })],
    ['id empty', JSON.stringify({ ...valid, id: '' })],
    ['sequence string', JSON.stringify({ ...valid, sequence: '7' })],
    ['sequence float', JSON.stringify({ ...valid, sequence: 7.5 })],
    ['type missing', JSON.stringify({ ...valid, type: undefined })],
    ['occurredAt string', JSON.stringify({ ...valid, occurredAt: '2026-01-01' })],
    ['occurredAt float', JSON.stringify({ ...valid, occurredAt: 1.5 })],
    ['data null', JSON.stringify({ ...valid, data: null })],
    ['data array', JSON.stringify({ ...valid, data: [] })],
    ['data missing', JSON.stringify({ ...valid, data: undefined })],
  ])('%s → ERR_WEBHOOK_INVALID_ENVELOPE', (_name, text) => {
    expect(parseEnvelope(Buffer.from(text))).toMatchObject({ ok: false, code: 'ERR_WEBHOOK_INVALID_ENVELOPE' });
  });

  it('never throws, and random bytes or random JSON are never an envelope', () => {
    fc.assert(
      fc.property(fc.oneof(fc.uint8Array().map((b) => Buffer.from(b)), fc.json().map((j) => Buffer.from(j))), (body) => {
        const r = parseEnvelope(body);
        // Used to assert only `typeof r.ok === 'boolean'`, which any result satisfies.
        expect(r).toMatchObject({ ok: false, code: 'ERR_WEBHOOK_INVALID_ENVELOPE' });
      }),
    );
  });
});
