import { createHmac } from 'node:crypto';

/**
 * `x-service-signature` for a delivery: `v1=` + lowercase hex HMAC-SHA256 of
 * `<timestampS>.<raw body>`, keyed with the whole secret string (`whsec_` included) as UTF-8.
 *
 * @example signDelivery('whsec_abc', 1767225600, '{"id":"evt_1"}') // 'v1=…64 hex…'
 */
export function signDelivery(secret: string, timestampS: number, rawBody: string): string {
  return `v1=${createHmac('sha256', Buffer.from(secret, 'utf8')).update(`${timestampS}.${rawBody}`, 'utf8').digest('hex')}`;
}
