/** One entry as the store hands it back: its id in the store and the JSON it holds (null when it holds none). */
export interface QueueEntry {
  readonly entryId: string;
  readonly json: string | null;
}

/** Counts the gauges are read from (all replicas). */
export interface QueueStats {
  readonly depth: number;
  /** Accepted-at of the oldest event not yet delivered nor dead (epoch ms), or null. */
  readonly oldestAcceptedAt: number | null;
  readonly deadLetters: number;
}

/** `queued`: stored now; `duplicate`: accepted before (not stored again); `full`: the queue holds its most. */
export type EnqueueOutcome = 'queued' | 'duplicate' | 'full';

/**
 * The storage half of queue mode (implemented in `src/redis/` by streams and scripts): one
 * consumer group, an entry is pending with exactly one consumer until it is delivered, parked for
 * a retry, or dead-lettered, each move atomic. It stores JSON and hands JSON back, checking
 * nothing: the worker (`QueueWorker`) verifies everything it reads.
 *
 * Every method rejects with an error that says whether it may have taken effect (`outcomeUnknown`,
 * src/lib/store-failure.ts).
 */
export interface QueueStore {
  /**
   * Stores the event unless its id was accepted before, marking the id accepted for
   * `retentionMs`, in one step; when the store replicates, resolves only once the configured
   * replicas hold it (rejects otherwise, even for a duplicate).
   */
  enqueue(eventId: string, json: string, acceptedAt: number, retentionMs: number): Promise<EnqueueOutcome>;
  /** New entries, now pending with `consumer`. */
  readNew(consumer: string, max: number): Promise<QueueEntry[]>;
  /**
   * Entries still pending with `consumer`, after `afterEntryId` (`0-0` for all): reads whose reply
   * was lost or came too late. Each one's visibility starts afresh (Redis 7 resets the idle time of
   * an entry read again by id), which the worker relies on to forward an entry read too late.
   */
  readPending(consumer: string, max: number, afterEntryId: string): Promise<QueueEntry[]>;
  /** Entries pending with any consumer for at least `minIdleMs`, now `consumer`'s. */
  takeOver(consumer: string, minIdleMs: number, max: number): Promise<QueueEntry[]>;
  /** For each id, whether the app accepted it before. */
  deliveredBefore(eventIds: readonly string[]): Promise<boolean[]>;
  /** The app accepted it: marks the id delivered for `retentionMs` and removes the entry. */
  markDelivered(entryId: string, eventId: string, retentionMs: number): Promise<void>;
  /**
   * Removes an entry that must not be forwarded: unreadable, or delivered before (`eventId` given:
   * the id stops counting as waiting too).
   */
  drop(entryId: string, eventId?: string): Promise<void>;
  /** Parks it (as `json`) until `dueAt`; false when the entry was not pending any more. */
  retryLater(entryId: string, dueAt: number, json: string): Promise<boolean>;
  /** Moves it (as `json`) to the dead letters; false when it was not pending any more. */
  deadLetter(entryId: string, eventId: string, json: string): Promise<boolean>;
  /** Moves parked entries due by `now` back to the queue; how many. */
  promoteDue(now: number, max: number): Promise<number>;
  stats(): Promise<QueueStats>;
  /** Removes consumers other than `self` with nothing pending, idle at least `staleMs`. */
  sweepConsumers(self: string, staleMs: number): Promise<void>;
  /** Dead letters after `afterEntryId` (null: from the oldest), at most `max`. */
  listDead(afterEntryId: string | null, max: number): Promise<QueueEntry[]>;
  /** Puts a dead letter back on the queue as `json`; false when it is gone (replayed by someone else). */
  replayDead(entryId: string, eventId: string, json: string, now: number): Promise<boolean>;
  /** Whether the queue exists at all (it was ever used under this prefix). */
  exists(): Promise<boolean>;
  /** `wake` runs when something became due (best effort: the worker polls anyway). */
  onWake(wake: () => void): Promise<void>;
  /** `hook` runs when the store answers again after it did not. */
  onRestored(hook: () => void): void;
}
