import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { signingSecretsFrom, verifyForwardedEvent, type ForwardRefusal } from '../../src/client/index.js';

// verifyForwardedEvent: the app's check that a request is its sidecar's forward. Signatures are made
// here with node:crypto, independently of the sidecar's signer and of the verifier under test.

const SECRET = 'app-signing-secret-current-0123456789';
const OLD = 'app-signing-secret-previous-012345678';
const NOW_MS = 1_767_225_600_123;
const NOW_S = Math.floor(NOW_MS / 1000);
const EVENT = { id: 'evt_1', sequence: 7, type: 'consent_action.created', occurredAt: NOW_MS - 5000, data: { userReference: 'alice', action: 'revoke' } };
const BODY = Buffer.from(JSON.stringify(EVENT));

const hmac = (secret: string, ts: number | string, body: Buffer): string => `v1=${createHmac('sha256', secret).update(`${ts}.`).update(body).digest('hex')}`;
const headersOf = (secret: string, ts: number | string, body: Buffer): Record<string, string> => ({
  'content-type': 'application/json',
  'x-consent-sidecar-verified': 'v1',
  'x-consent-sidecar-timestamp': String(ts),
  'x-consent-sidecar-signature': hmac(secret, ts, body),
});
const verify = (headers: Record<string, string | string[]>, rawBody: Uint8Array | ArrayBuffer = BODY, extra: { toleranceS?: number; secrets?: string[] } = {}) =>
  verifyForwardedEvent({ headers, rawBody, secrets: extra.secrets ?? [SECRET, OLD], nowMs: NOW_MS, ...(extra.toleranceS === undefined ? {} : { toleranceS: extra.toleranceS }) });

describe('verifyForwardedEvent', () => {
  it('a genuine, fresh forward: verified, with the event exactly as the body holds it', () => {
    const r = verify(headersOf(SECRET, NOW_S, BODY));
    expect(r).toEqual({ verified: true, event: EVENT, timestampS: NOW_S });
  });

  it('signed by any secret of the list (rotation), and the REDEC hand-over (no sequence)', () => {
    expect(verify(headersOf(OLD, NOW_S, BODY)).verified).toBe(true);
    const handed = Buffer.from(JSON.stringify({ id: 'reconcile_abc', type: 'consent_sidecar.redec.notification_pending', occurredAt: NOW_MS, data: { id: 'nr_1' } }));
    expect(verify(headersOf(SECRET, NOW_S, handed), handed)).toMatchObject({ verified: true, event: { id: 'reconcile_abc' } });
  });

  it.each<[string, Record<string, string | string[]>, Buffer | undefined, ForwardRefusal]>([
    ['no signature at all (a header anyone can write is not one)', { 'x-consent-sidecar-verified': 'v1', 'content-type': 'application/json' }, undefined, 'timestamp_missing'],
    ['a timestamp and no signature', { 'x-consent-sidecar-timestamp': String(NOW_S) }, undefined, 'signature_missing'],
    ['a signature of another scheme', { ...headersOf(SECRET, NOW_S, BODY), 'x-consent-sidecar-signature': hmac(SECRET, NOW_S, BODY).replace('v1=', 'v2=') }, undefined, 'signature_scheme'],
    ['a made-up signature', { ...headersOf(SECRET, NOW_S, BODY), 'x-consent-sidecar-signature': `v1=${'0'.repeat(64)}` }, undefined, 'signature_mismatch'],
    ['a signature in upper-case hex', { ...headersOf(SECRET, NOW_S, BODY), 'x-consent-sidecar-signature': hmac(SECRET, NOW_S, BODY).toUpperCase().replace('V1=', 'v1=') }, undefined, 'signature_mismatch'],
    ['signed with a secret that is not the pod\'s', headersOf('another-pods-secret-0123456789abcdef', NOW_S, BODY), undefined, 'signature_mismatch'],
    ["signed with the service's webhook secret", headersOf('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', NOW_S, BODY), undefined, 'signature_mismatch'],
    ['a stale timestamp (301 s old), correctly signed', headersOf(SECRET, NOW_S - 301, BODY), undefined, 'timestamp_too_old'],
    ['a timestamp 301 s ahead, correctly signed', headersOf(SECRET, NOW_S + 301, BODY), undefined, 'timestamp_too_new'],
    ['a timestamp that is not epoch seconds', headersOf(SECRET, `${NOW_S}.5`, BODY), undefined, 'timestamp_invalid'],
    ['a timestamp moved after signing', { ...headersOf(SECRET, NOW_S, BODY), 'x-consent-sidecar-timestamp': String(NOW_S - 1) }, undefined, 'signature_mismatch'],
    ['an altered body (one byte)', headersOf(SECRET, NOW_S, BODY), Buffer.from(BODY.toString().replace('revoke', 'grant!')), 'signature_mismatch'],
    ['a re-serialised body (whitespace added)', headersOf(SECRET, NOW_S, BODY), Buffer.from(JSON.stringify(EVENT, null, 1)), 'signature_mismatch'],
    ['the signature given twice', { ...headersOf(SECRET, NOW_S, BODY), 'x-consent-sidecar-signature': [hmac(SECRET, NOW_S, BODY), hmac(SECRET, NOW_S, BODY)] }, undefined, 'header_repeated'],
    ['the timestamp given twice', { ...headersOf(SECRET, NOW_S, BODY), 'x-consent-sidecar-timestamp': [String(NOW_S), String(NOW_S)] }, undefined, 'header_repeated'],
  ])('%s: refused %s', (_what, headers, body, reason) => {
    const r = verify(headers, body ?? BODY);
    expect(r).toMatchObject({ verified: false, reason });
    expect(r).not.toHaveProperty('event');
  });

  it('the tolerance holds in both directions, to the second, and can be set', () => {
    expect(verify(headersOf(SECRET, NOW_S - 300, BODY)).verified).toBe(true);
    expect(verify(headersOf(SECRET, NOW_S + 300, BODY)).verified).toBe(true);
    expect(verify(headersOf(SECRET, NOW_S - 31, BODY), BODY, { toleranceS: 30 })).toMatchObject({ verified: false, reason: 'timestamp_too_old' });
    expect(verify(headersOf(SECRET, NOW_S - 30, BODY), BODY, { toleranceS: 30 }).verified).toBe(true);
  });

  it('a signed body that is not one unambiguous event is refused: never handed to the app', () => {
    const cases: [string, ForwardRefusal][] = [
      ['not json', 'not_json'],
      ['{"id":"evt_1","type":"t","occurredAt":1,"data":{},"type":"consent_action.created"}', 'duplicate_member'],
      ['[1]', 'invalid_envelope'],
      ['{"id":"","type":"t","occurredAt":1,"data":{}}', 'invalid_envelope'],
      ['{"id":"e","type":"t","occurredAt":"1","data":{}}', 'invalid_envelope'],
      ['{"id":"e","type":"t","occurredAt":1,"data":[]}', 'invalid_envelope'],
      ['{"id":"e","type":"t","occurredAt":1,"data":{},"sequence":"7"}', 'invalid_envelope'],
    ];
    for (const [text, reason] of cases) {
      const body = Buffer.from(text);
      expect(verify(headersOf(SECRET, NOW_S, body), body), text).toMatchObject({ verified: false, reason });
    }
    const notUtf8 = Buffer.from([0x7b, 0xff, 0x7d]);
    expect(verify(headersOf(SECRET, NOW_S, notUtf8), notUtf8)).toMatchObject({ verified: false, reason: 'not_json' });
  });

  it("takes node's req.headers, a Fetch Headers, and the body as a Uint8Array or an ArrayBuffer", () => {
    const h = headersOf(SECRET, NOW_S, BODY);
    const fetchHeaders = new Headers(h);
    expect(verifyForwardedEvent({ headers: fetchHeaders, rawBody: new Uint8Array(BODY), secrets: [SECRET], nowMs: NOW_MS }).verified).toBe(true);
    const copy = new ArrayBuffer(BODY.length);
    new Uint8Array(copy).set(BODY);
    expect(verifyForwardedEvent({ headers: h, rawBody: copy, secrets: [SECRET], nowMs: NOW_MS }).verified).toBe(true);
    // A Fetch Headers joins a repeated header into one value: never a signature.
    fetchHeaders.append('x-consent-sidecar-signature', h['x-consent-sidecar-signature']!);
    expect(verifyForwardedEvent({ headers: fetchHeaders, rawBody: BODY, secrets: [SECRET], nowMs: NOW_MS }).verified).toBe(false);
  });

  it('the real clock by default: a forward signed now is fresh, one signed an hour ago is not', () => {
    const now = Math.floor(Date.now() / 1000);
    expect(verifyForwardedEvent({ headers: headersOf(SECRET, now, BODY), rawBody: BODY, secrets: [SECRET] }).verified).toBe(true);
    expect(verifyForwardedEvent({ headers: headersOf(SECRET, now - 3600, BODY), rawBody: BODY, secrets: [SECRET] })).toMatchObject({ reason: 'timestamp_too_old' });
  });

  it('misuse throws: no secrets, a body that is not bytes (parsed or decoded), a bad tolerance', () => {
    const headers = headersOf(SECRET, NOW_S, BODY);
    for (const secrets of [[], [''], 'a-secret-given-as-one-string' as never, undefined as never]) {
      expect(() => verifyForwardedEvent({ headers, rawBody: BODY, secrets })).toThrow(TypeError);
    }
    for (const rawBody of [BODY.toString(), EVENT, undefined]) expect(() => verifyForwardedEvent({ headers, rawBody: rawBody as never, secrets: [SECRET] })).toThrow(TypeError);
    expect(() => verifyForwardedEvent({ headers, rawBody: BODY, secrets: [SECRET], toleranceS: Number.NaN })).toThrow(RangeError);
  });

  it('signingSecretsFrom reads the file as the sidecar does: one a line, blanks and # comments skipped', () => {
    expect(signingSecretsFrom(`# rotation\n${SECRET}\r\n\n  ${OLD}  \n`)).toEqual([SECRET, OLD]);
  });
});
