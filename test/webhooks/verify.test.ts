import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { verifyDelivery, WEBHOOK_AUTH_ERROR_CODES, type DeliveryHeaders, type WebhookAuthErrorCode } from '../../src/webhooks/index.js';
import { loadVectors, SECRET_A, SECRET_B, sign, VECTOR_TS } from '../helpers/webhooks.js';

const base = { toleranceS: 300, requiredHeader: null, secrets: [SECRET_A] } as const;

describe('verifyDelivery against openssl vectors', () => {
  for (const v of loadVectors()) {
    it(`${v.file} under ${v.secret.slice(0, 10)}…`, () => {
      const headers = { 'x-service-timestamp': String(v.timestamp), 'x-service-signature': `v1=${v.hex}` };
      const result = verifyDelivery(headers, v.body, { ...base, secrets: [v.secret], nowMs: v.timestamp * 1000 });
      expect(result).toMatchObject({ ok: true, secretIndex: 0 });
    });
  }

  it('a decoded and re-serialised body no longer verifies', () => {
    const v = loadVectors().find((x) => x.file === 'unicode-whitespace.json')!;
    const reserialised = Buffer.from(JSON.stringify(JSON.parse(v.body.toString('utf8'))));
    const headers = { 'x-service-timestamp': String(v.timestamp), 'x-service-signature': `v1=${v.hex}` };
    const result = verifyDelivery(headers, reserialised, { ...base, secrets: [v.secret], nowMs: v.timestamp * 1000 });
    expect(result).toMatchObject({ ok: false, code: 'ERR_WEBHOOK_SIGNATURE_MISMATCH' });
  });
});

describe('verifyDelivery rejections', () => {
  const body = Buffer.from('{"id":"evt_1"}');
  const nowMs = VECTOR_TS * 1000;
  const good = { 'x-service-timestamp': String(VECTOR_TS), 'x-service-signature': sign(SECRET_A, VECTOR_TS, body) };
  const hex = good['x-service-signature'].slice(3);
  const cases: Array<[string, DeliveryHeaders, WebhookAuthErrorCode]> = [
    ['no timestamp', { 'x-service-signature': good['x-service-signature'] }, 'ERR_WEBHOOK_TIMESTAMP_MISSING'],
    ['empty timestamp', { ...good, 'x-service-timestamp': '' }, 'ERR_WEBHOOK_TIMESTAMP_MISSING'],
    ['no signature', { 'x-service-timestamp': good['x-service-timestamp'] }, 'ERR_WEBHOOK_SIGNATURE_MISSING'],
    ['v0 scheme', { ...good, 'x-service-signature': `v0=${hex}` }, 'ERR_WEBHOOK_SIGNATURE_SCHEME'],
    ['bare hex', { ...good, 'x-service-signature': hex }, 'ERR_WEBHOOK_SIGNATURE_SCHEME'],
    ['upper-case V1', { ...good, 'x-service-signature': `V1=${hex}` }, 'ERR_WEBHOOK_SIGNATURE_SCHEME'],
    ['timestamp abc', { ...good, 'x-service-timestamp': 'abc' }, 'ERR_WEBHOOK_TIMESTAMP_INVALID'],
    ['timestamp Infinity', { ...good, 'x-service-timestamp': 'Infinity' }, 'ERR_WEBHOOK_TIMESTAMP_INVALID'],
    ['timestamp NaN', { ...good, 'x-service-timestamp': 'NaN' }, 'ERR_WEBHOOK_TIMESTAMP_INVALID'],
    ['stale', { ...good, 'x-service-timestamp': String(VECTOR_TS - 301) }, 'ERR_WEBHOOK_TIMESTAMP_TOO_OLD'],
    ['future', { ...good, 'x-service-timestamp': String(VECTOR_TS + 301) }, 'ERR_WEBHOOK_TIMESTAMP_TOO_NEW'],
    ['wrong hex', { ...good, 'x-service-signature': `v1=${'0'.repeat(64)}` }, 'ERR_WEBHOOK_SIGNATURE_MISMATCH'],
    ['upper-case hex', { ...good, 'x-service-signature': `v1=${hex.toUpperCase()}` }, 'ERR_WEBHOOK_SIGNATURE_MISMATCH'],
    ['short hex', { ...good, 'x-service-signature': `v1=${hex.slice(0, 10)}` }, 'ERR_WEBHOOK_SIGNATURE_MISMATCH'],
    ['long hex', { ...good, 'x-service-signature': `${good['x-service-signature']}00` }, 'ERR_WEBHOOK_SIGNATURE_MISMATCH'],
    ['empty after v1=', { ...good, 'x-service-signature': 'v1=' }, 'ERR_WEBHOOK_SIGNATURE_MISMATCH'],
    ['non-ascii hex', { ...good, 'x-service-signature': `v1=${'é'.repeat(32)}` }, 'ERR_WEBHOOK_SIGNATURE_MISMATCH'],
  ];
  it.each(cases)('%s → %s', (_name, headers, code) => {
    const result = verifyDelivery(headers, body, { ...base, nowMs });
    expect(result).toMatchObject({ ok: false, code });
  });

  it('required header: missing, wrong, right', () => {
    const requiredHeader = { name: 'authorization', value: 'Bearer tenant-token' };
    const opts = { ...base, nowMs, requiredHeader };
    expect(verifyDelivery(good, body, opts)).toMatchObject({ ok: false, code: 'ERR_WEBHOOK_REQUIRED_HEADER_MISSING' });
    expect(verifyDelivery({ ...good, authorization: 'Bearer tenant-tokeN' }, body, opts)).toMatchObject({
      ok: false,
      code: 'ERR_WEBHOOK_REQUIRED_HEADER_MISMATCH',
    });
    expect(verifyDelivery({ ...good, authorization: 'Bearer tenant-token' }, body, opts)).toMatchObject({ ok: true });
  });

  it('rotation: the index of the matching secret, never which value', () => {
    const signedB = { ...good, 'x-service-signature': sign(SECRET_B, VECTOR_TS, body) };
    expect(verifyDelivery(signedB, body, { ...base, nowMs, secrets: [SECRET_A, SECRET_B] })).toMatchObject({ ok: true, secretIndex: 1 });
    expect(verifyDelivery(signedB, body, { ...base, nowMs, secrets: [SECRET_A] })).toMatchObject({ ok: false });
    // The prefix is part of the key.
    const noPrefix = { ...good, 'x-service-signature': sign(SECRET_A.slice('whsec_'.length), VECTOR_TS, body) };
    expect(verifyDelivery(noPrefix, body, { ...base, nowMs })).toMatchObject({ ok: false, code: 'ERR_WEBHOOK_SIGNATURE_MISMATCH' });
  });
});

describe('tolerance edges (frozen clock)', () => {
  afterEach(() => vi.useRealTimers());
  const body = Buffer.from('{}');

  it.each([
    [-300, true],
    [300, true],
    [-301, false],
    [301, false],
    [0, true],
  ])('timestamp = now %+d s → ok %s', (offset, ok) => {
    vi.useFakeTimers({ toFake: ['Date'] });
    // 999 ms into the second: whole seconds are compared, as the service stamps them.
    vi.setSystemTime(VECTOR_TS * 1000 + 999);
    const ts = VECTOR_TS + offset;
    const headers = { 'x-service-timestamp': String(ts), 'x-service-signature': sign(SECRET_A, ts, body) };
    expect(verifyDelivery(headers, body, { ...base, nowMs: Date.now() }).ok).toBe(ok);
  });
});

describe('properties', () => {
  it('any body signed by node:crypto verifies; any changed byte does not', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 512 }), fc.nat(), (bytes, at) => {
        const body = Buffer.from(bytes);
        const headers = { 'x-service-timestamp': String(VECTOR_TS), 'x-service-signature': sign(SECRET_A, VECTOR_TS, body) };
        const opts = { ...base, nowMs: VECTOR_TS * 1000 };
        expect(verifyDelivery(headers, body, opts).ok).toBe(true);
        const tampered = Buffer.from(body);
        const i = at % tampered.length;
        tampered[i] = (tampered[i]! ^ 0x01) & 0xff;
        expect(verifyDelivery(headers, tampered, opts)).toMatchObject({ ok: false, code: 'ERR_WEBHOOK_SIGNATURE_MISMATCH' });
      }),
    );
  });

  it('never throws on arbitrary header values', () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), fc.uint8Array(), (ts, sig, bytes) => {
        const r = verifyDelivery({ 'x-service-timestamp': ts, 'x-service-signature': sig }, Buffer.from(bytes), {
          ...base,
          nowMs: VECTOR_TS * 1000,
        });
        // Used to assert only `typeof r.ok === 'boolean'`: random headers must be refused, with a known code.
        expect(r.ok).toBe(false);
        if (!r.ok) expect(WEBHOOK_AUTH_ERROR_CODES).toContain(r.code);
      }),
    );
  });
});
