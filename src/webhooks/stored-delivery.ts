import { singleValue } from '../lib/headers.js';
import type { MarkerMacs } from './markers.js';
import { parseEnvelope, type WebhookEnvelope } from './envelope.js';
import { EVENT_ID_ENCODING_HEADER, eventIdHeader } from './event-id.js';
import { SIGNATURE_SCHEME_PREFIX } from './signature.js';
import { parseTimestamp, verifyBodySignature } from './verify.js';

/** Added to every forwarded event: the sidecar checked the signature. */
export const VERIFIED_HEADER = 'x-consent-sidecar-verified';
/** Added when the event's sequence is lower than the highest already seen. */
export const OUT_OF_ORDER_HEADER = 'x-consent-sidecar-out-of-order';
/**
 * Queue mode: which forward of the event this is (1, 2, …). A higher number means the sidecar did
 * not see the app accept an earlier one (a refusal, a timeout, a lost connection): an app that did
 * accept it late gets it again, and can tell.
 */
export const ATTEMPT_HEADER = 'x-consent-sidecar-attempt';

/** What a delivery carried that the app gets again (the signed parts, and the unsigned ids checked for shape). */
export interface DeliveryFacts {
  /** The envelope `id` (from the verified body, never from the unsigned header). */
  readonly eventId: string;
  /** `x-service-timestamp` exactly as received: it is what was signed. */
  readonly timestamp: string;
  /** `x-service-signature` exactly as received. */
  readonly signature: string;
  /** `x-service-delivery-id` when it was a plain token (visible ASCII, at most 128 characters). */
  readonly deliveryId?: string;
  readonly outOfOrder?: boolean;
  /** Queue mode: which forward of the event this is (1 the first), as `x-consent-sidecar-attempt`. */
  readonly attempt?: number;
}

const TOKEN = /^[\x21-\x7e]{1,128}$/;

/** A delivery id worth passing on, or undefined (it is not signed: only its shape is checked). */
export function deliveryIdOf(value: string | readonly string[] | undefined): string | undefined {
  const v = singleValue(value);
  return typeof v === 'string' && TOKEN.test(v) ? v : undefined;
}

/**
 * The headers the app gets with an event, in both delivery modes, rebuilt from an allow-list:
 * nothing a sender (or a writer to the queue's store) adds reaches the app.
 */
export function appHeaders(facts: DeliveryFacts): Record<string, string> {
  const id = eventIdHeader(facts.eventId);
  const out: Record<string, string> = {
    'content-type': 'application/json',
    'x-service-event-id': id.value,
    'x-service-timestamp': facts.timestamp,
    'x-service-signature': facts.signature,
    [VERIFIED_HEADER]: 'v1',
  };
  if (id.encoded) out[EVENT_ID_ENCODING_HEADER] = 'percent';
  if (facts.deliveryId !== undefined) out['x-service-delivery-id'] = facts.deliveryId;
  if (facts.outOfOrder) out[OUT_OF_ORDER_HEADER] = '1';
  if (facts.attempt !== undefined) out[ATTEMPT_HEADER] = String(facts.attempt);
  return out;
}

/**
 * A delivery as the queue keeps it (JSON in its store): what the service sent, as received, so it
 * can be verified again before every forward, plus the queue's own bookkeeping. Nothing in it is
 * trusted when read back: see {@link decodeStored} and {@link reverify}.
 */
export interface StoredDelivery {
  readonly v: 2;
  /** Envelope id: the dedup key and the id of the event the signature must cover. */
  readonly id: string;
  readonly timestamp: string;
  readonly signature: string;
  readonly deliveryId?: string;
  /** Raw body, base64 (bytes forwarded unchanged). */
  readonly body: string;
  readonly outOfOrder?: boolean;
  /** When the ingress (or a replay) put it on the queue (epoch ms); the horizon counts from here. */
  readonly acceptedAt: number;
  /** Forwards tried and not accepted so far. */
  readonly attempts: number;
  /**
   * Times a worker found no live replica whose routes take its type and parked it to wait for one
   * (its own backoff: waiting for a route spends none of the app's attempts).
   */
  readonly routeWaits?: number;
  /** Why the last attempt failed (`app answered 500`, `signature_mismatch`, …). */
  readonly lastError?: string;
  /** Dead letters only: when it was parked (epoch ms). */
  readonly deadAt?: number;
  /**
   * Put back on the queue by an operator (`webhook dead-letters replay`, which holds the secrets):
   * when (epoch ms), and the marker MAC of that act ({@link replaySubject}). A stored delivery may
   * be forwarded until the horizon plus the tolerance after the later of its signed timestamp and
   * a replay whose MAC verifies.
   */
  readonly replayedAt?: number;
  readonly replayMac?: string;
  /**
   * Dead letters the app refused until the horizon, or that no replica routed until then, only: the
   * mark of the worker that parked it ({@link deadSubject}); replay needs it. An `expired` or
   * `signature_mismatch` one has none.
   */
  readonly deadMac?: string;
}

/**
 * Bytes an entry of a stored delivery can take at most for bodies of `maxBodyBytes` (base64, 4/3)
 * plus the envelope around it (ids, timestamp, signature, bookkeeping: 16 KiB is generous). An
 * entry larger than this was not written by the ingress: it is never read into the process.
 */
export function storedDeliveryMaxBytes(maxBodyBytes: number): number {
  return 4 * Math.ceil(maxBodyBytes / 3) + 16_384;
}

/** What a replay's MAC covers: the event, its signed timestamp and signature, and when it was replayed. */
export function replaySubject(stored: Pick<StoredDelivery, 'id' | 'timestamp' | 'signature'>, replayedAt: number): string {
  return JSON.stringify([stored.id, stored.timestamp, stored.signature, replayedAt]);
}

/**
 * What a dead letter's mark covers: that it may be replayed, the event, its signed timestamp and
 * signature, and when it was parked. Marked are what a replay is for: an event the app did not
 * take until the horizon (`dead_lettered`), and one no replica's routes took until then
 * (`unrouted`: replayed once a route exists). An `expired` entry may be a copy of an event the app
 * took whose delivered marker has lapsed, and a `signature_mismatch` one is not the service's:
 * neither is ever forwarded, so neither is marked, and a mark made for another reason (an earlier
 * version marked every dead letter) does not verify.
 */
export function deadSubject(stored: Pick<StoredDelivery, 'id' | 'timestamp' | 'signature'>, deadAt: number): string {
  return JSON.stringify(['dead_lettered', stored.id, stored.timestamp, stored.signature, deadAt]);
}

/** The replay of a stored delivery: when, if its MAC verifies; `invalid` when it carries one that does not; null when none. */
export function replayOf(stored: StoredDelivery, macs: MarkerMacs): number | 'invalid' | null {
  if (stored.replayedAt === undefined && stored.replayMac === undefined) return null;
  if (stored.replayedAt === undefined || !macs.verify('replay', replaySubject(stored, stored.replayedAt), stored.replayMac)) return 'invalid';
  return stored.replayedAt;
}

/** The stored form of a verified delivery. */
export function storeDelivery(facts: DeliveryFacts, rawBody: Buffer, acceptedAt: number): StoredDelivery {
  return {
    v: 2,
    id: facts.eventId,
    timestamp: facts.timestamp,
    signature: facts.signature,
    ...(facts.deliveryId !== undefined ? { deliveryId: facts.deliveryId } : {}),
    body: rawBody.toString('base64'),
    ...(facts.outOfOrder ? { outOfOrder: true } : {}),
    acceptedAt,
    attempts: 0,
  };
}

const isString = (v: unknown): v is string => typeof v === 'string';
const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;

/** Parses what the store handed back; null when it is not a stored delivery of ours (shape only: see {@link reverify}). */
export function decodeStored(json: string | null): StoredDelivery | null {
  if (json === null) return null;
  let v: unknown;
  try {
    v = JSON.parse(json);
  } catch {
    return null;
  }
  const e = v as Partial<StoredDelivery> | null;
  if (!e || typeof e !== 'object' || e.v !== 2) return null;
  if (!isString(e.id) || !isString(e.timestamp) || !isString(e.signature) || !isString(e.body)) return null;
  if (!isCount(e.acceptedAt) || !isCount(e.attempts)) return null;
  if (e.routeWaits !== undefined && !isCount(e.routeWaits)) return null;
  if (e.deliveryId !== undefined && !isString(e.deliveryId)) return null;
  if (e.lastError !== undefined && !isString(e.lastError)) return null;
  if (e.replayedAt !== undefined && !isCount(e.replayedAt)) return null;
  if (e.replayMac !== undefined && !isString(e.replayMac)) return null;
  if (e.deadMac !== undefined && !isString(e.deadMac)) return null;
  return e as StoredDelivery;
}

/** The event of a stored delivery that verified again: its envelope, raw body and the headers for the app. */
export interface Reverified {
  readonly ok: true;
  readonly envelope: WebhookEnvelope;
  readonly body: Buffer;
  readonly headers: Record<string, string>;
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** How old a stored delivery may be: `maxAgeMs` after the later of its signed timestamp and `replayedAt`. */
export interface AgeLimit {
  readonly nowMs: number;
  /** The queue's horizon plus the signature tolerance. */
  readonly maxAgeMs: number;
  /** A replay whose MAC verified (epoch ms), if any. */
  readonly replayedAt?: number | null;
}

/**
 * Verifies a stored delivery again against the current secrets, as the ingress did, but without
 * the ±300 s window (an event may wait in the queue for days): the HMAC over the stored timestamp
 * and raw body must match the stored signature under one of `secrets`, and the signed body's
 * envelope `id` must be the one the entry claims. Whoever can write to the store can forge
 * neither. `signature_mismatch` otherwise; it is never forwarded.
 *
 * With `age`, nothing outlives what the service allows: a delivery signed longer ago than the
 * horizon plus the tolerance (or replayed by an operator that long ago) is `expired`, however
 * genuine, so a copy kept by anyone who could read Redis cannot be added back and forwarded later.
 */
export function reverify(
  stored: StoredDelivery,
  secrets: readonly string[],
  age?: AgeLimit,
): Reverified | { readonly ok: false; readonly reason: 'signature_mismatch' | 'expired' } {
  const mismatch = { ok: false, reason: 'signature_mismatch' } as const;
  // The ingress's own timestamp rule: a form it accepted is read here too.
  const timestampS = parseTimestamp(stored.timestamp);
  if (!stored.signature.startsWith(SIGNATURE_SCHEME_PREFIX) || timestampS === null || !BASE64.test(stored.body)) return mismatch;
  const body = Buffer.from(stored.body, 'base64');
  const checked = {
    ok: true as const,
    timestamp: stored.timestamp,
    timestampS,
    skewS: 0,
    signatureHex: stored.signature.slice(SIGNATURE_SCHEME_PREFIX.length),
  };
  if (!verifyBodySignature(checked, body, secrets).ok) return mismatch;
  const parsed = parseEnvelope(body);
  if (!parsed.ok || parsed.envelope.id !== stored.id) return mismatch;
  if (age) {
    const since = Math.max(checked.timestampS * 1000, age.replayedAt ?? 0);
    if (!(age.nowMs - since <= age.maxAgeMs)) return { ok: false, reason: 'expired' };
  }
  const headers = appHeaders({
    eventId: parsed.envelope.id,
    timestamp: stored.timestamp,
    signature: stored.signature,
    ...(deliveryIdOf(stored.deliveryId) !== undefined ? { deliveryId: stored.deliveryId! } : {}),
    outOfOrder: stored.outOfOrder === true,
    attempt: stored.attempts + 1,
  });
  return { ok: true, envelope: parsed.envelope, body, headers };
}

/** The envelope `type` of a stored body, for listings (unverified: a listing shows, it never forwards). */
export function storedType(stored: StoredDelivery): string {
  const parsed = parseEnvelope(Buffer.from(stored.body, 'base64'));
  return parsed.ok ? parsed.envelope.type : '?';
}
