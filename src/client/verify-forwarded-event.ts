import { createHmac, timingSafeEqual } from 'node:crypto';
import { findDuplicateMember } from '../lib/duplicate-member.js';

/** Default accepted |now − timestamp| of a forward (s), both directions: the service's own tolerance. */
export const DEFAULT_FORWARD_TOLERANCE_S = 300;
/** When the sidecar signed the forward (epoch seconds). */
export const FORWARD_TIMESTAMP_HEADER = 'x-consent-sidecar-timestamp';
/** `v1=<lowercase hex HMAC-SHA256 of "<timestamp>.<exact raw body>">` under the pod's app signing secret. */
export const FORWARD_SIGNATURE_HEADER = 'x-consent-sidecar-signature';

/**
 * Request headers as the app's framework gives them: node's `req.headers` (lower-case names; a
 * value may be an array), any record of lower-case names, or a Fetch `Headers`.
 */
export type ForwardHeaders = Readonly<Record<string, string | readonly string[] | undefined>> | { get(name: string): string | null };

/** What {@link verifyForwardedEvent} is given. */
export interface VerifyForwardedEventInput {
  readonly headers: ForwardHeaders;
  /** The request body exactly as received, as bytes, before any JSON parsing (`express.raw()`, `await request.arrayBuffer()`). */
  readonly rawBody: Uint8Array | ArrayBuffer;
  /**
   * The pod's app signing secrets, the lines of the file the sidecar signs with (see
   * {@link signingSecretsFrom}); a forward signed by any one of them is genuine (rotation).
   */
  readonly secrets: readonly string[];
  /** Accepted |now − timestamp| (s), both directions; default {@link DEFAULT_FORWARD_TOLERANCE_S}. */
  readonly toleranceS?: number;
  /** The clock the timestamp is held to (epoch ms); default `Date.now()`. */
  readonly nowMs?: number;
}

/**
 * An event the sidecar handed the app: a service event (verified by the sidecar against the
 * service's signature, with its `sequence`) or the sidecar's own REDEC hand-over
 * (`type: 'consent_sidecar.redec.notification_pending'`, no `sequence`). Every member as the body holds it.
 */
export interface ForwardedEvent {
  readonly id: string;
  readonly type: string;
  /** Epoch ms. */
  readonly occurredAt: number;
  readonly data: Readonly<Record<string, unknown>>;
  /** The service's global sequence (absent on the sidecar's REDEC hand-over). */
  readonly sequence?: number;
  readonly [member: string]: unknown;
}

/**
 * Why a request is not a genuine, fresh forward of the sidecar (in the order they are checked):
 * - `header_repeated`: the timestamp or the signature header given more than once;
 * - `timestamp_missing`, `signature_missing`: a header absent (the sidecar signs nothing without `--app-signing-secret-file`);
 * - `signature_scheme`: the signature does not start with `v1=`;
 * - `timestamp_invalid`: not decimal epoch seconds;
 * - `timestamp_too_old`, `timestamp_too_new`: further than the tolerance from now;
 * - `signature_mismatch`: no secret gives that signature over these exact bytes (forged, altered, or another pod's secret);
 * - `not_json`, `duplicate_member`, `invalid_envelope`: signed, but not one unambiguous event (never sent by a sidecar).
 */
export type ForwardRefusal =
  | 'header_repeated'
  | 'timestamp_missing'
  | 'signature_missing'
  | 'signature_scheme'
  | 'timestamp_invalid'
  | 'timestamp_too_old'
  | 'timestamp_too_new'
  | 'signature_mismatch'
  | 'not_json'
  | 'duplicate_member'
  | 'invalid_envelope';

/** A genuine forward (`event` is its parsed body), or a refusal with its reason: never a bare boolean. */
export type VerifyForwardedEventResult =
  | { readonly verified: true; readonly event: ForwardedEvent; /** The signed timestamp (epoch s). */ readonly timestampS: number }
  | { readonly verified: false; readonly reason: ForwardRefusal; readonly detail?: string };

const TIMESTAMP = /^\d{1,12}$/;
const SIGNATURE_HEX = /^[0-9a-f]{64}$/;
// Fatal: bytes that are not UTF-8 are no event. ignoreBOM keeps a BOM in the text, so JSON.parse refuses it.
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * Whether a request that reached the app's webhook URL is an event its own sidecar forwarded, and
 * if so the event. The signature is checked over the raw bytes before anything is parsed, in
 * constant time, against every secret; the timestamp must be within `toleranceS` of now. Only the
 * returned `event` is vouched for: the other headers of the request are not signed.
 * Throws only for misuse (no secrets, a body that is not bytes); an untrusted request is a result.
 *
 * @example
 * import { signingSecretsFrom, verifyForwardedEvent } from '@consent-sidecar/client';
 * const secrets = signingSecretsFrom(readFileSync(process.env.CONSENT_SIDECAR_APP_SIGNING_SECRET_FILE!, 'utf8'));
 * app.post('/webhooks', express.raw({ type: '*\/*' }), (req, res) => {
 *   const r = verifyForwardedEvent({ headers: req.headers, rawBody: req.body, secrets });
 *   if (!r.verified) return res.status(401).json({ error: r.reason });
 *   handle(r.event); // idempotent by r.event.id
 *   res.sendStatus(204);
 * });
 */
export function verifyForwardedEvent(input: VerifyForwardedEventInput): VerifyForwardedEventResult {
  const { secrets, toleranceS = DEFAULT_FORWARD_TOLERANCE_S } = input;
  if (!Array.isArray(secrets) || secrets.length === 0 || !secrets.every((s) => typeof s === 'string' && s !== '')) {
    throw new TypeError('verifyForwardedEvent: secrets must be a non-empty array of non-empty strings (the lines of the app signing secret file)');
  }
  if (!(typeof toleranceS === 'number' && Number.isFinite(toleranceS) && toleranceS >= 0)) throw new RangeError('verifyForwardedEvent: toleranceS must be a number of seconds ≥ 0');
  const body = bytesOf(input.rawBody);
  const nowMs = input.nowMs ?? Date.now();

  const timestamp = header(input.headers, FORWARD_TIMESTAMP_HEADER);
  const signature = header(input.headers, FORWARD_SIGNATURE_HEADER);
  if (timestamp === null || signature === null) return refused('header_repeated');
  if (timestamp === undefined) return refused('timestamp_missing');
  if (signature === undefined) return refused('signature_missing');
  if (!signature.startsWith('v1=')) return refused('signature_scheme');
  if (!TIMESTAMP.test(timestamp)) return refused('timestamp_invalid');
  const timestampS = Number(timestamp);
  const distance = Math.floor(nowMs / 1000) - timestampS;
  if (distance > toleranceS) return refused('timestamp_too_old');
  if (-distance > toleranceS) return refused('timestamp_too_new');

  const hex = signature.slice(3);
  const given = SIGNATURE_HEX.test(hex) ? Buffer.from(hex, 'hex') : null;
  let matched = false;
  // Every secret is tried, even after a match: the time taken does not tell which one matched.
  for (const secret of secrets) {
    const expected = createHmac('sha256', Buffer.from(secret, 'utf8')).update(`${timestamp}.`, 'utf8').update(body).digest();
    if (given !== null && timingSafeEqual(given, expected)) matched = true;
  }
  if (!matched) return refused('signature_mismatch');

  const event = envelopeOf(body);
  if (typeof event === 'string') return refused(event === 'not_json' || event === 'duplicate_member' ? event : 'invalid_envelope', event);
  return Object.freeze({ verified: true as const, event, timestampS });
}

/**
 * The secrets of an app signing secret file: one a line, blank lines and `#` comments skipped (the
 * sidecar's own rule for `--app-signing-secret-file`).
 *
 * @example signingSecretsFrom(readFileSync('/var/run/secrets/consent-sidecar/app-signing-secret', 'utf8'))
 */
export function signingSecretsFrom(text: string): string[] {
  return text
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
}

function refused(reason: ForwardRefusal, detail?: string): VerifyForwardedEventResult {
  return Object.freeze({ verified: false as const, reason, ...(detail === undefined || detail === reason ? {} : { detail }) });
}

function bytesOf(raw: unknown): Buffer {
  if (raw instanceof Uint8Array) return Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  if (raw instanceof ArrayBuffer) return Buffer.from(raw);
  // A string or an object is what a body parser made of the bytes: a re-serialisation breaks the signature.
  throw new TypeError('verifyForwardedEvent: rawBody must be the body as received, as bytes (a Buffer, Uint8Array or ArrayBuffer), not a string or a parsed object');
}

/** A header given once (its value), absent or blank (`undefined`), or repeated (`null`: ambiguous, refused). */
function header(headers: ForwardHeaders, name: string): string | null | undefined {
  let value: unknown;
  if (typeof (headers as { get?: unknown }).get === 'function') value = (headers as { get(name: string): string | null }).get(name) ?? undefined;
  else value = (headers as Readonly<Record<string, unknown>>)[name];
  if (Array.isArray(value)) {
    if (value.length > 1) return null;
    value = value[0];
  }
  return typeof value === 'string' && value.trim() !== '' ? value : undefined;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The verified body as an event, or what is wrong with it. */
function envelopeOf(body: Buffer): ForwardedEvent | 'not_json' | 'duplicate_member' | string {
  let text: string;
  let value: unknown;
  try {
    text = utf8.decode(body);
    value = JSON.parse(text);
  } catch {
    return 'not_json';
  }
  if (findDuplicateMember(text) !== undefined) return 'duplicate_member';
  if (!isObject(value)) return 'not a JSON object';
  if (typeof value.id !== 'string' || value.id === '') return 'id is not a non-empty string';
  if (typeof value.type !== 'string' || value.type === '') return 'type is not a non-empty string';
  if (!Number.isSafeInteger(value.occurredAt)) return 'occurredAt is not an integer (epoch ms)';
  if (!isObject(value.data)) return 'data is not an object';
  if ('sequence' in value && !Number.isSafeInteger(value.sequence)) return 'sequence is not an integer';
  return Object.freeze(value) as ForwardedEvent;
}
