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

/** Where an entry sits and what came right before it: the id of the log's last entry when it was appended. */
export interface ChainedPlace extends EntryPlace {
  readonly previous: string;
}

/**
 * What an appender seals, at two moments: the entry before it is written, for the place it is
 * about to take; the nudge once the append said which id came before it.
 */
export interface EntrySealer {
  /** The MAC written with the entry (over {@link sealSubject}); null without a key. */
  entry(place: EntryPlace): string | null;
  /** The MAC the nudge carries (over {@link chainSubject}); null without a key. */
  chain(place: ChainedPlace): string | null;
}

const subject = (fields: readonly string[]): string => fields.map((f) => `${Buffer.byteLength(f, 'utf8')}:${f}`).join('');
const userOf = (revocation: Revocation): string => (revocation.scope === 'user' ? revocation.userReference : '');

/**
 * What an entry's MAC covers: everything a reader acts on. Its place binds it to one entry (an
 * entry's sealed fields copied onto another id, or into a log of another epoch, do not verify);
 * origin, scope and user are what it says. Each field is length-prefixed, so none runs into the next.
 */
export function sealSubject(place: EntryPlace, origin: string, revocation: Revocation): string {
  return subject(['invalidation', place.epoch, place.id, origin, revocation.scope, userOf(revocation)]);
}

/**
 * {@link sealSubject} and the entry before it: a reader whose position is `previous` may take the
 * entry as the next one without reading the log (nothing lies between), since only a replica that
 * holds a webhook secret can have said so, and it says so only of what the append told it: the
 * stream's last id when its entry was added.
 */
export function chainSubject(place: ChainedPlace, origin: string, revocation: Revocation): string {
  return subject(['invalidation-chained', place.epoch, place.previous, place.id, origin, revocation.scope, userOf(revocation)]);
}

/** How `origin` seals its entry of `revocation` (see {@link EntrySealer}). */
export function entrySealer(macs: EntryMacs, origin: string, revocation: Revocation): EntrySealer {
  return { entry: (place) => macs.sign(sealSubject(place, origin, revocation)), chain: (place) => macs.sign(chainSubject(place, origin, revocation)) };
}
