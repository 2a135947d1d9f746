import type { Revocation } from '../lib/revocation-hook.js';
import type { ChainedPlace, EntrySealer } from './invalidation-seal.js';

/**
 * One revocation as the log holds it, as written by anyone who can write to the store:
 * `revocation` is null when the entry could not be read, and nothing in it is believed before its
 * `mac` verifies (see `EntryMacs`).
 */
export interface InvalidationEntry {
  readonly position: string;
  /** The entry's own id in the log (unique within an epoch): what its MAC binds it to. */
  readonly id: string;
  readonly origin: string;
  readonly revocation: Revocation | null;
  /** The MAC written with it (null: none). */
  readonly mac: string | null;
}

/**
 * What the store's pub/sub delivered after an append, unchecked: anyone who can publish on the
 * channel can send one, and one can be lost, come twice, or come after the nudge of a later
 * entry (each appender publishes once its append is answered). `entry` is null when the message
 * carried none a reader could act on (a nudge of an older version, or anything else): it only
 * says something may have been appended.
 */
export interface InvalidationNudge {
  readonly entry: {
    readonly id: string;
    readonly previous: string;
    readonly origin: string;
    readonly revocation: Revocation;
    /** The MAC over the entry's chained place (see `chainSubject`), under the reader's own epoch. */
    readonly chain: string | null;
  } | null;
  /**
   * A bare nudge, with no entry: an appender whose entry was written but not replicated in time
   * (`--redis-wait-replicas`) says "read the log" (the append was answered 503).
   */
  readonly bare?: boolean;
}

/** Where {@link InvalidationLog.append} put an entry: its epoch, its id and the id that was the log's last before it. */
export type AppendedPlace = ChainedPlace;

/**
 * How an entry of id `id` after `previous` stands to a reader's position:
 * - a new position: it is the very next entry (its `previous` is the position's own id);
 * - `stale`: at or before the position (already read past);
 * - `gap`: after the position, with something in between the reader has not read.
 */
export type Step = { readonly next: string } | 'stale' | 'gap';

/**
 * What a read of the log says, facts only: the decisions about them are `FleetInvalidation`'s.
 * Each flag says entries after the position read from are gone before they were read:
 * - `trimmed`: from the front (the reader fell behind the log's retention);
 * - `deleted`: otherwise (removed one by one, however: fewer entries after the position than were
 *   added after it, the store's own record of a deletion after it, or an entry announced to this
 *   reader that is not there);
 * - `rewound`: the log's head is before the position read from (a failover lost entries).
 */
export interface InvalidationPage {
  /** Changes when the log was lost and started again (a store that restarted empty). */
  readonly epoch: string;
  /** When the epoch was made (the store's clock, ms), or null when the store does not say. */
  readonly epochBornMs: number | null;
  /** Position of the newest entry ever written (the start when none). */
  readonly head: string;
  readonly trimmed: boolean;
  readonly deleted: boolean;
  readonly rewound: boolean;
  readonly entries: readonly InvalidationEntry[];
}

/** What a reader adds to a read. */
export interface ReadOptions {
  /**
   * Sent back on this reader's own subscription by the same atomic step that read the log (see
   * {@link InvalidationLog.onEcho}): heard, it proves the subscription was up when the read ran,
   * so every entry appended after the read reaches this reader as a nudge while it stays up.
   */
  readonly echo?: string;
  /** The id of an entry a nudge announced (its MAC verified) that must be in what the read covers: `deleted` when it is not. */
  readonly announced?: string | null;
}

/**
 * The shared, bounded, ordered log of revocations every replica reads from the last position it
 * saw (implemented in `src/redis/` by a stream), with a nudge on a pub/sub channel that carries
 * each entry appended, sealed with the id before it. A reader at that id applies it without
 * reading; the log is what every reader trusts to catch up after any gap. Every read method
 * rejects when the store gave no page (an error that may carry `refused`, see src/lib/store-failure.ts).
 *
 * A scripted stand-in needs only to keep entries in order with the MAC `seal` gave for each, say
 * which entry came before each one appended, deliver each nudge to every subscriber it has not
 * lost, echo a read's token, report each of the page's flags when it removes entries, and answer
 * {@link answeredSince}.
 */
export interface InvalidationLog {
  /**
   * Appends, then nudges readers with the entry and the id that was the log's last before it,
   * sealed (`seal.chain`); rejects when either is not known to be done. `seal.entry` gives the MAC
   * of the entry at the place it is about to take; it may be asked more than once, when the place
   * it was asked for was taken first. `after`, a position this replica reached, is no earlier
   * than where the log ends. Resolves where the entry went.
   */
  append(origin: string, revocation: Revocation, seal: EntrySealer, after: string | null): Promise<AppendedPlace>;
  /** Entries after `position` (at most `max`), or none and the head when `position` is null. */
  readAfter(position: string | null, max: number, options?: ReadOptions): Promise<InvalidationPage>;
  /**
   * Entries written since `sinceMs` (epoch ms, the store's clock; at most `max`), for a reader that
   * has no position yet; `trimmed` when some written since then are gone.
   */
  readSince(sinceMs: number, max: number, options?: ReadOptions): Promise<InvalidationPage>;
  /** Orders two entry ids of one epoch: negative when `a` came first, 0 when the same, positive after. */
  compareIds(a: string, b: string): number;
    /** How an entry stands to `position` (see {@link Step}). */
  step(position: string, entry: { readonly id: string; readonly previous: string }): Step;
  /** Subscribes: `listener` hears every nudge (and {@link onEcho} its echoes). Best effort: see {@link onDisturbed}. */
  onAppended(listener: (nudge: InvalidationNudge) => void): Promise<void>;
  /** `listener` hears the echo tokens of this reader's reads, as its subscription delivers them. */
  onEcho(listener: (token: string) => void): void;
  /**
   * Publishes `token` on this reader's echo channel alone (what {@link onEcho} hears): a keep-alive
   * of the subscription, no read. Rejects when it is not known to be published.
   */
  echo(token: string): Promise<void>;
  /** `hook` runs when the store answers again after it did not. */
  onRestored(hook: () => void): void;
  /**
   * `hook` runs when nudges may have been lost on the way to this reader: a connection to the
   * store broke or moved, or the store stopped answering (a subscription that is not up misses
   * what is published meanwhile).
   */
  onDisturbed(hook: () => void): void;
  /**
   * Whether the store answered anything (an error reply included) at or after `since`
   * (performance.now()): tells a log this replica cannot read while the store answers others (it
   * may hold revocations another replica was answered 200 for) from a store that answers nobody.
   */
  answeredSince(since: number): boolean;
}
