import { createHmac, createSecretKey, type Hmac, type KeyObject } from 'node:crypto';

/** The only signature scheme the document defines (Versioning: "identified by the prefix `v1=`"). */
export const SIGNATURE_SCHEME_PREFIX = 'v1=';

/**
 * Lowercase hex HMAC-SHA256 of `<timestamp>.<raw body>`, keyed by the whole secret string
 * (`whsec_` included) as UTF-8. The body stays bytes: the document says re-serialisation breaks the
 * signature, and decoding invalid UTF-8 would too.
 *
 * @param timestamp the `x-service-timestamp` header exactly as sent (epoch seconds, as text)
 * @example hmacHex('whsec_abc', '1767225600', Buffer.from('{"id":"evt_1"}')) // 64 hex chars
 */
export function hmacHex(secret: string, timestamp: string, rawBody: Buffer): string {
  return hmacStart(secret, timestamp).update(rawBody).digest('hex');
}

/**
 * An HMAC over `<timestamp>.` ready to take the raw body chunk by chunk, as it arrives, so a body
 * never has to be joined before it can be verified.
 */
export function hmacStart(secret: string | KeyObject, timestamp: string): Hmac {
  return createHmac('sha256', typeof secret === 'string' ? Buffer.from(secret, 'utf8') : secret).update(`${timestamp}.`, 'utf8');
}

const keysByList = new WeakMap<readonly string[], readonly KeyObject[]>();

/**
 * The HMAC key of each secret (UTF-8, `whsec_` included), made once per secret list: a rotation
 * brings a new list, and the old list's keys go with it. On Node 24, `createHmac` with a Buffer
 * key spends about 6 µs turning it into a key object, every call; with the KeyObject the whole HMAC
 * of a delivery takes 1.4 µs (it was a fifth of the webhook ingress's CPU).
 */
export function secretKeys(secrets: readonly string[]): readonly KeyObject[] {
  let keys = keysByList.get(secrets);
  if (keys === undefined) keysByList.set(secrets, (keys = Object.freeze(secrets.map((s) => createSecretKey(Buffer.from(s, 'utf8'))))));
  return keys;
}

/** The headers the service sends with a body signed by `secret` at `timestampS` (epoch seconds). */
export function signatureHeaders(
  secret: string,
  timestampS: number,
  rawBody: Buffer,
): { readonly 'x-service-timestamp': string; readonly 'x-service-signature': string } {
  const timestamp = String(timestampS);
  return {
    'x-service-timestamp': timestamp,
    'x-service-signature': `${SIGNATURE_SCHEME_PREFIX}${hmacHex(secret, timestamp, rawBody)}`,
  };
}
