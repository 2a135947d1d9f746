import type { Revocation } from '../lib/revocation-hook.js';

/**
 * MACs of the invalidation log's entries, keyed from the webhook secrets by the composition root
 * (a Redis writer holds none, so it can make no entry a replica acts on as written). Written under
 * the first secret, accepted under any, so a rotation that keeps the old secret keeps old entries good.
 *
 * A scripted stand-in can seal with anything that verifies what it signed, e.g. the subject itself.
 */
export interface EntryMacs {
  /** The MAC to write with `subject`; null when this replica holds no key (its entries go unsealed). */
  sign(subject: string): string | null;
  /** Whether `mac` is `subject`'s under one of the current keys (false for none, and without keys). */
  verify(subject: string, mac: string | null): boolean;
}

/** Where an entry sits: the log's epoch and the entry's own id in it (unique within the epoch). */
export interface EntryPlace {
  readonly epoch: string;
  readonly id: string;
}

/**
 * What an entry's MAC covers: everything a reader acts on. Its place binds it to one entry (an
 * entry's sealed fields copied onto another id, or into a log of another epoch, do not verify);
 * origin, scope and user are what it says. Each field is length-prefixed, so none runs into the next.
 */
export function sealSubject(place: EntryPlace, origin: string, revocation: Revocation): string {
  const user = revocation.scope === 'user' ? revocation.userReference : '';
  return ['invalidation', place.epoch, place.id, origin, revocation.scope, user].map((f) => `${Buffer.byteLength(f, 'utf8')}:${f}`).join('');
}
