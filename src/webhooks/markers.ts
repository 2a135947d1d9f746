import { createHmac, timingSafeEqual, type KeyObject, createSecretKey } from 'node:crypto';

/**
 * What a marker says, each MACed apart: an event accepted (dedup), delivered (queue), parked as a
 * dead letter by a worker, a dead letter an operator replayed, an entry of the invalidation log
 * (a revocation shared with the other replicas), or a queue worker's route table (where entries its
 * reader's routes do not take may be handed).
 */
export type MarkerKind = 'accepted' | 'delivered' | 'dead' | 'replay' | 'invalidation' | 'routes';

/** The label every marker key is derived under: a new derivation gets a new version, never a new meaning for this one. */
const DERIVATION = 'consent-sidecar marker v1';
/** Hex digits of a marker MAC: HMAC-SHA256 truncated to 128 bits. */
const MAC_HEX = 32;

const keysByList = new WeakMap<readonly string[], readonly KeyObject[]>();

/** The marker key of each secret, derived once per secret list (a rotation brings a new list). */
function markerKeys(secrets: readonly string[]): readonly KeyObject[] {
  let keys = keysByList.get(secrets);
  if (keys === undefined) {
    keys = Object.freeze(secrets.map((s) => createSecretKey(createHmac('sha256', Buffer.from(s, 'utf8')).update(DERIVATION).digest())));
    keysByList.set(secrets, keys);
  }
  return keys;
}

/** The marker's message: kind and subject, length-prefixed, so no two pairs run together. */
const message = (kind: MarkerKind, subject: string): string => `${kind}:${Buffer.byteLength(subject, 'utf8')}:${subject}`;

/**
 * MACs of what the sidecar writes to Redis and later believes (contract, Several replicas: a Redis
 * writer holds no webhook secret, so it can make none of these). The key is derived from each
 * webhook secret, HMAC-SHA256(secret, "consent-sidecar marker v1"), never the secret itself:
 * markers are written under the first configured secret and accepted under any, so a rotation that
 * keeps the old secret for a while keeps the old markers good.
 *
 * A scripted stand-in can pass `() => ['whsec_test']`.
 *
 * @example
 * const macs = new MarkerMacs(() => ['whsec_abc']);
 * const mac = macs.sign('accepted', 'evt_1'); // 32 hex digits
 * macs.verify('accepted', 'evt_1', mac); // true
 */
export class MarkerMacs {
  constructor(private readonly secrets: () => readonly string[]) {}

  /** The MAC to write now (first secret). */
  sign(kind: MarkerKind, subject: string): string {
    const key = markerKeys(this.secrets())[0];
    if (!key) throw new RangeError('MarkerMacs: no webhook secret configured');
    return mac(key, kind, subject);
  }

  /** Every MAC a reader accepts now, one per configured secret (for a script that must compare). */
  accepted(kind: MarkerKind, subject: string): string[] {
    return markerKeys(this.secrets()).map((key) => mac(key, kind, subject));
  }

  /** Whether `given` is the MAC of `kind` and `subject` under one of the configured secrets (constant time). */
  verify(kind: MarkerKind, subject: string, given: string | null | undefined): boolean {
    if (typeof given !== 'string' || given.length !== MAC_HEX || !/^[0-9a-f]+$/.test(given)) return false;
    const bytes = Buffer.from(given, 'hex');
    let ok = false;
    for (const key of markerKeys(this.secrets())) if (timingSafeEqual(bytes, Buffer.from(mac(key, kind, subject), 'hex'))) ok = true;
    return ok;
  }
}

function mac(key: KeyObject, kind: MarkerKind, subject: string): string {
  return createHmac('sha256', key).update(message(kind, subject), 'utf8').digest('hex').slice(0, MAC_HEX);
}
