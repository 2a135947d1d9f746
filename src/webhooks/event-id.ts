/** Longest envelope `id` accepted, in UTF-8 bytes (contract, Several replicas: Event ids); longer is 400 `invalid_envelope`. */
export const MAX_EVENT_ID_BYTES = 1024;
/** Characters of an id a log line carries at most. */
export const LOG_ID_CHARS = 128;
/** Sent with `x-service-event-id` when the id had to be percent-encoded to be a header value. */
export const EVENT_ID_ENCODING_HEADER = 'x-consent-sidecar-event-id-encoding';

/** Visible ASCII: what a header value can carry unchanged. */
const VISIBLE_ASCII = /^[\x21-\x7e]*$/;

/** The id as a log field: whole up to {@link LOG_ID_CHARS} characters, else cut with a mark. */
export function logId(id: string): string {
  return id.length <= LOG_ID_CHARS ? id : `${id.slice(0, LOG_ID_CHARS)}…`;
}

/**
 * The `x-service-event-id` value for an id: unchanged when it is visible ASCII (the usual case),
 * else its UTF-8 bytes percent-encoded (all but `A-Z a-z 0-9 - . _ ~`, so `%` itself is encoded and
 * decoding is exact), flagged by {@link EVENT_ID_ENCODING_HEADER}: `percent`. A CR, LF or a
 * character above U+00FF cannot be a header value at all.
 */
export function eventIdHeader(id: string): { value: string; encoded: boolean } {
  if (VISIBLE_ASCII.test(id)) return { value: id, encoded: false };
  let value = '';
  for (const byte of Buffer.from(id, 'utf8')) {
    const unreserved = (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a) || byte === 0x2d || byte === 0x2e || byte === 0x5f || byte === 0x7e;
    value += unreserved ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return { value, encoded: true };
}
