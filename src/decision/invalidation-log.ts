import type { Revocation } from '../lib/revocation-hook.js';
import type { EntryPlace } from './invalidation-seal.js';

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

/**
 * The shared, bounded, ordered log of revocations every replica reads from the last position it
 * saw (implemented in `src/redis/` by a stream). A nudge tells readers there is something new;
 * the log itself is what they trust to catch up after any gap. Every read method rejects when the
 * store gave no page (an error that may carry `refused`, see src/lib/store-failure.ts).
 *
 * A scripted stand-in needs only to keep entries in order with the MAC `seal` gave for each, report
 * each of the page's flags when it removes entries, and answer {@link silentForMs}.
 */
export interface InvalidationLog {
  /**
   * Appends and nudges readers; rejects when it is not known to be written. `seal` gives the MAC of
   * the entry at the place it is about to take (null: written without one); it may be asked more
   * than once, when the place it was asked for was taken first.
   */
  append(origin: string, revocation: Revocation, seal: (place: EntryPlace) => string | null): Promise<void>;
  /** Entries after `position` (at most `max`), or none and the head when `position` is null. */
  readAfter(position: string | null, max: number): Promise<InvalidationPage>;
  /**
   * Entries written since `sinceMs` (epoch ms, the store's clock; at most `max`), for a reader that
   * has no position yet; `trimmed` when some written since then are gone.
   */
  readSince(sinceMs: number, max: number): Promise<InvalidationPage>;
  /** `nudge` runs when something was appended (best effort: a lost nudge costs latency, not a revocation). */
  onAppended(nudge: () => void): Promise<void>;
  /** `hook` runs when the store answers again after it did not. */
  onRestored(hook: () => void): void;
  /**
   * Milliseconds since the store last answered anything (an error reply included), on the
   * monotonic clock: tells a log this replica cannot read while the store answers others (it may
   * hold revocations another replica was answered 200 for) from a store that answers nobody.
   */
  silentForMs(): number;
}
