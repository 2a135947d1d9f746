/**
 * One entry as the store hands it back: its id in the store and the JSON it holds (null when it
 * holds none, or, in a listing, when it is too large to read: then `size` says how large).
 */
export interface QueueEntry {
  readonly entryId: string;
  readonly json: string | null;
  readonly size?: number;
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
 * What an enqueue did, and whether it stored over a dedup value that was no accepted marker with
 * one of the MACs given (forged, or written without our secrets): counted by the caller.
 */
export interface Enqueued {
  readonly outcome: EnqueueOutcome;
  readonly displaced: boolean;
}

/** The accepted marker an enqueue writes (its MAC) and the MACs that count as accepted before. */
export interface AcceptedMarks {
  readonly mac: string;
  readonly accepted: readonly string[];
}

/**
 * What a claim of an event before a forward found (see {@link QueueStore.claimForward}): the event
 * delivered before; another entry of it being forwarded, for `remainingMs` more at most; or the
 * claim is ours now, `displaced` when it took the place of a value that was no replica's claim.
 */
export type ForwardClaim =
  | { readonly kind: 'claimed'; readonly displaced: boolean }
  | { readonly kind: 'delivered' }
  | { readonly kind: 'busy'; readonly remainingMs: number };

/**
 * How much a read may bring into the process: no entry larger than `entryBytes` (the store
 * dead-letters those itself, as `oversized`, without handing them over), and no more than about
 * `batchBytes` per call (one entry past it at most).
 */
export interface ReadBounds {
  readonly entryBytes: number;
  readonly batchBytes: number;
}

/** Entries a read handed over, and how many larger ones it dead-lettered in the store instead. */
export interface QueueBatch {
  readonly entries: QueueEntry[];
  readonly oversized: number;
}

/** One replica's route table as it told the others: the value it wrote (the caller checks its MAC). */
export interface RouterAdvert {
  /** The consumer the value is filed under. */
  readonly consumer: string;
  readonly json: string;
}

/** How much a listing of route tables may bring into the process. */
/** The route tables listed; `whole` false when a bound stopped the listing before the last one. */
export interface RouterListing {
  readonly tables: readonly RouterAdvert[];
  readonly whole: boolean;
}

export interface AdvertBounds {
  /** Tables read at most. */
  readonly max: number;
  /** A table larger than this (its consumer's name and its value) is skipped, never read. */
  readonly entryBytes: number;
  /** The listing stops before it would hold more than this (bytes). */
  readonly totalBytes: number;
}

/**
 * The storage half of queue mode (implemented in `src/redis/` by streams and scripts): one
 * consumer group, an entry is pending with exactly one consumer until it is delivered, parked for
 * a retry, or dead-lettered, each move atomic. It stores JSON and hands JSON back, checking
 * nothing but size (the bounds a read is given) and the equality of MACs it is handed: the worker
 * (`QueueWorker`) verifies everything it reads, markers included.
 *
 * Every method rejects with an error that says whether it may have taken effect (`outcomeUnknown`,
 * src/lib/store-failure.ts).
 */
export interface QueueStore {
  /** Where the route tables are filed (the deployment's key for them): each table names it, under its MAC. */
  readonly routesAt: string;
  /**
   * Stores the event unless its id was accepted before (an accepted marker with one of
   * `marks.accepted`), marking the id accepted (`marks.mac`) for `retentionMs`, in one step; when
   * the store replicates, resolves only once the configured replicas hold it (rejects otherwise,
   * even for a duplicate).
   */
  enqueue(eventId: string, json: string, acceptedAt: number, retentionMs: number, marks: AcceptedMarks): Promise<Enqueued>;
  /** New entries, now pending with `consumer` (at most `max`, within `bounds`). */
  readNew(consumer: string, max: number, bounds: ReadBounds): Promise<QueueBatch>;
  /**
   * Entries still pending with `consumer`, after `afterEntryId` (`0-0` for all): reads whose reply
   * was lost or came too late. Each one's visibility starts afresh (Redis 7 resets the idle time of
   * an entry read again by id), which the worker relies on to forward an entry read too late. A
   * batch shorter than `max` is not the end (the bounds may cut it): read on after its last entry
   * until one comes back empty.
   */
  readPending(consumer: string, max: number, afterEntryId: string, bounds: ReadBounds): Promise<QueueBatch>;
  /** Entries pending with any consumer for at least `minIdleMs`, now `consumer`'s. */
  takeOver(consumer: string, minIdleMs: number, max: number, bounds: ReadBounds): Promise<QueueBatch>;
  /**
   * For each id, the delivered marker's MAC the store holds, or null (the caller checks each MAC;
   * a marker the store cannot hand back as one, of another type or too long, is a value no MAC matches).
   */
  deliveredMarks(eventIds: readonly string[]): Promise<(string | null)[]>;
  /**
   * In one step: unless the event is delivered (a marker with one of `deliveredMacs`) or claimed
   * under another token with at most `longestLeaseMs` left, claims it under `token` for `leaseMs`
   * (the same token claims again, renewing the lease). Anything else the claim finds (no TTL, more
   * left than `longestLeaseMs`, not a claim at all) is taken over, `displaced`.
   */
  claimForward(eventId: string, token: string, leaseMs: number, longestLeaseMs: number, deliveredMacs: readonly string[]): Promise<ForwardClaim>;
  /** Lets the claim go if it still holds `token` (the forward did not deliver: the next attempt may claim at once). */
  releaseForward(eventId: string, token: string): Promise<void>;
  /**
   * The app accepted it: writes the delivered marker (`mac`, kept `markerTtlMs`), removes the entry,
   * and announces `{id, mac}` to every replica ({@link onDelivered}).
   */
  markDelivered(entryId: string, eventId: string, markerTtlMs: number, mac: string): Promise<void>;
  /**
   * Removes an entry that must not be forwarded: unreadable, or delivered before (`eventId` given:
   * the id stops counting as waiting too).
   */
  drop(entryId: string, eventId?: string): Promise<void>;
  /**
   * Parks it (as `json`) until `dueAt`; false, nothing moved, when the entry is not pending with
   * `consumer` any more (taken over while this call was on its way: the new holder decides).
   */
  retryLater(consumer: string, entryId: string, dueAt: number, json: string): Promise<boolean>;
  /** Moves it (as `json`) to the dead letters; false, as {@link retryLater}, when it is not `consumer`'s any more. */
  deadLetter(consumer: string, entryId: string, eventId: string, json: string): Promise<boolean>;
  /**
   * Gives an entry pending with `consumer` to the consumer `to` (its visibility starting afresh) and
   * tells `to` ({@link onHandedOver}); false, nothing moved, when it is not `consumer`'s any more.
   */
  handOver(consumer: string, entryId: string, to: string): Promise<boolean>;
  /** Files `json` (this consumer's route table) where every replica lists it ({@link routers}). */
  advertiseRoutes(consumer: string, json: string): Promise<void>;
  /** Removes what `consumer` filed with {@link advertiseRoutes}. */
  forgetRoutes(consumer: string): Promise<void>;
  /** The route tables filed, within `bounds` (the caller checks each one: shape, MAC, age). */
  routers(bounds: AdvertBounds): Promise<RouterListing>;
  /** Moves parked entries due by `now` back to the queue; how many. */
  promoteDue(now: number, max: number): Promise<number>;
  stats(): Promise<QueueStats>;
  /** Removes consumers other than `self` with nothing pending, idle at least `staleMs`. */
  sweepConsumers(self: string, staleMs: number): Promise<void>;
  /**
   * Dead letters after `afterEntryId` (null: from the oldest), at most `max`, within `bounds`: one
   * larger than `bounds.entryBytes` comes back with a null `json` and its `size`, never its content.
   * A page shorter than `max` is not the end: read on until one comes back empty.
   */
  listDead(afterEntryId: string | null, max: number, bounds: ReadBounds): Promise<QueueEntry[]>;
  /** Puts a dead letter back on the queue as `json`; false when it is gone (replayed by someone else). */
  replayDead(entryId: string, eventId: string, json: string, now: number): Promise<boolean>;
  /** Whether the queue exists at all (it was ever used under this prefix). */
  exists(): Promise<boolean>;
  /** `wake` runs when something became due (best effort: the worker polls anyway). */
  onWake(wake: () => void): Promise<void>;
  /** `listener` hears each delivery any replica announced (best effort), with its marker MAC. */
  onDelivered(listener: (eventId: string, mac: string) => void): Promise<void>;
  /** `hook` runs when an entry was handed to `consumer` ({@link handOver}; best effort: takeovers find it anyway). */
  onHandedOver(consumer: string, hook: () => void): Promise<void>;
  /** `hook` runs when the store answers again after it did not. */
  onRestored(hook: () => void): void;
}
