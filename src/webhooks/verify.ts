import { createHash, timingSafeEqual } from 'node:crypto';
import type { RequiredHeader } from '../config/index.js';
import { singleValue } from '../lib/headers.js';
import type { WebhookAuthErrorCode } from './errors.js';
import { hmacStart, secretKeys, SIGNATURE_SCHEME_PREFIX } from './signature.js';

/** Request headers as `node:http` gives them (lower-case names). */
export type DeliveryHeaders = Readonly<Record<string, string | readonly string[] | undefined>>;

/** What the checks of the headers need; the secrets come later, with the body. */
export interface HeaderCheckOptions {
  /** Accepted |now − timestamp|, both directions (s); the document's limit is 300. */
  readonly toleranceS: number;
  /** Current time (epoch ms). */
  readonly nowMs: number;
  /** The portal's optional custom header; `null` when none is configured. */
  readonly requiredHeader: RequiredHeader | null;
}

/** A refusal, with the measured skew when the timestamp could be read (for the histogram). */
export interface VerifyFailure {
  readonly ok: false;
  readonly code: WebhookAuthErrorCode;
  /** now − timestamp (s), when the timestamp was a finite number. */
  readonly skewS?: number;
}

/** Headers that passed every check that does not need the body. */
export interface CheckedHeaders {
  readonly ok: true;
  /** `x-service-timestamp` exactly as sent: it is what was signed. */
  readonly timestamp: string;
  readonly timestampS: number;
  /** now − timestamp (s); positive when the delivery is late. */
  readonly skewS: number;
  /** The hex after `v1=`, unvalidated. */
  readonly signatureHex: string;
}

/** A verified delivery. */
export interface Verified {
  readonly ok: true;
  /** Position of the matching secret in the configured list (rotation), never its value. */
  readonly secretIndex: number;
  readonly timestampS: number;
  readonly skewS: number;
  /** `x-service-timestamp` exactly as verified (what the app gets, what the queue stores). */
  readonly timestamp: string;
  /** `x-service-signature` exactly as verified (`v1=<hex>`). */
  readonly signature: string;
}

export type HeaderCheckResult = CheckedHeaders | VerifyFailure;
export type VerifyResult = Verified | VerifyFailure;


/** Whether `hex` is an HMAC-SHA256 in lower-case hex, as `digest('hex')` writes it (a loop: the regex cost 0.3 µs a delivery). */
function isSignatureHex(hex: string): boolean {
  if (hex.length !== 64) return false;
  for (let i = 0; i < 64; i++) {
    const c = hex.charCodeAt(i);
    if (!((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66))) return false;
  }
  return true;
}

const digest = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

/** The forms of `x-service-timestamp` accepted: decimal epoch seconds, with an optional fraction. */
const TIMESTAMP = /^\d{1,12}(?:\.\d{1,9})?$/;

/**
 * The one timestamp rule, shared by the ingress and the queue's re-verification: `x-service-timestamp`
 * as epoch seconds, or null when it is not one. Decimal digits with an optional fraction
 * (`1764150000`, `1764150000.0`) are read; anything else a number parser would also take (signs,
 * exponents, hex, spaces, `Infinity`) is refused, so whatever the ingress accepts the queue delivers.
 */
export function parseTimestamp(text: string): number | null {
  return TIMESTAMP.test(text) ? Number(text) : null;
}

/**
 * Every check the document lists that needs no body, in a fixed order: required custom header, then
 * timestamp and signature headers present, `v1=` scheme, finite timestamp, tolerance. Cheap enough
 * to run before the body is read, so an unauthenticated sender never makes us buffer anything.
 */
export function checkDeliveryHeaders(headers: DeliveryHeaders, options: HeaderCheckOptions): HeaderCheckResult {
  // A header given twice is ambiguous: refused, never resolved by picking one (src/lib/headers.ts).
  const required = options.requiredHeader;
  if (required) {
    const given = singleValue(headers[required.name]);
    if (given === null) return { ok: false, code: 'ERR_WEBHOOK_HEADER_REPEATED' };
    if (given === undefined) return { ok: false, code: 'ERR_WEBHOOK_REQUIRED_HEADER_MISSING' };
    // Digests have equal lengths, so the comparison leaks neither the value nor its length.
    if (!timingSafeEqual(digest(given), digest(required.value))) {
      return { ok: false, code: 'ERR_WEBHOOK_REQUIRED_HEADER_MISMATCH' };
    }
  }

  const timestamp = singleValue(headers['x-service-timestamp']);
  const signature = singleValue(headers['x-service-signature']);
  if (timestamp === null || signature === null) return { ok: false, code: 'ERR_WEBHOOK_HEADER_REPEATED' };
  if (timestamp === undefined) return { ok: false, code: 'ERR_WEBHOOK_TIMESTAMP_MISSING' };
  if (signature === undefined) return { ok: false, code: 'ERR_WEBHOOK_SIGNATURE_MISSING' };
  if (!signature.startsWith(SIGNATURE_SCHEME_PREFIX)) return { ok: false, code: 'ERR_WEBHOOK_SIGNATURE_SCHEME' };

  const timestampS = parseTimestamp(timestamp);
  if (timestampS === null) return { ok: false, code: 'ERR_WEBHOOK_TIMESTAMP_INVALID' };

  const skewS = options.nowMs / 1000 - timestampS;
  // Whole seconds on our side, as the service's are: a delivery stamped exactly `tolerance` seconds
  // ago is accepted whatever the milliseconds of our clock.
  const distance = Math.floor(options.nowMs / 1000) - timestampS;
  if (distance > options.toleranceS) return { ok: false, code: 'ERR_WEBHOOK_TIMESTAMP_TOO_OLD', skewS };
  if (-distance > options.toleranceS) return { ok: false, code: 'ERR_WEBHOOK_TIMESTAMP_TOO_NEW', skewS };

  return { ok: true, timestamp, timestampS, skewS, signatureHex: signature.slice(SIGNATURE_SCHEME_PREFIX.length) };
}

/** Verifies a raw body as it arrives: feed every chunk, in order, then {@link BodyVerifier.finish}. */
export interface BodyVerifier {
  update(chunk: Buffer): void;
  /** The verdict over every byte fed; call once. */
  finish(): VerifyResult;
}

/**
 * HMAC of `<timestamp>.<raw body>` under each secret, computed chunk by chunk and compared in
 * constant time. Every secret is tried even after a match so the time taken does not tell which one
 * (or whether any) matched.
 */
export function startBodyVerification(checked: CheckedHeaders, secrets: readonly string[]): BodyVerifier {
  const hmacs = secretKeys(secrets).map((key) => hmacStart(key, checked.timestamp));
  return {
    update(chunk) {
      for (const h of hmacs) h.update(chunk);
    },
    finish() {
      // The digest's 32 bytes against the given hex decoded once; hex that is not exactly 64
      // lower-case digits (what the service sends) is no signature of ours, and never decoded
      // (Buffer.from stops silently at the first bad digit).
      const given = isSignatureHex(checked.signatureHex) ? Buffer.from(checked.signatureHex, 'hex') : null;
      let matched = -1;
      for (let index = 0; index < hmacs.length; index++) {
        const expected = hmacs[index]!.digest();
        const equal = given !== null && timingSafeEqual(given, expected);
        if (equal && matched < 0) matched = index;
      }
      if (matched < 0) return { ok: false, code: 'ERR_WEBHOOK_SIGNATURE_MISMATCH', skewS: checked.skewS };
      return {
        ok: true,
        secretIndex: matched,
        timestampS: checked.timestampS,
        skewS: checked.skewS,
        timestamp: checked.timestamp,
        signature: `${SIGNATURE_SCHEME_PREFIX}${checked.signatureHex}`,
      };
    },
  };
}

/** {@link startBodyVerification} over a whole body at once. */
export function verifyBodySignature(
  checked: CheckedHeaders,
  rawBody: Buffer,
  secrets: readonly string[],
): VerifyResult {
  const v = startBodyVerification(checked, secrets);
  v.update(rawBody);
  return v.finish();
}

/** Everything a delivery must pass before its body may be parsed; used by the listener and the CLI. */
export function verifyDelivery(
  headers: DeliveryHeaders,
  rawBody: Buffer,
  options: HeaderCheckOptions & { readonly secrets: readonly string[] },
): VerifyResult {
  const checked = checkDeliveryHeaders(headers, options);
  return checked.ok ? verifyBodySignature(checked, rawBody, options.secrets) : checked;
}
