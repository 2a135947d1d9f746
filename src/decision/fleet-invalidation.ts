import { randomUUID } from 'node:crypto';
import { Counter, type Registry } from '../observability/prom.js';
import { applyTo, type Revocation, type RevocationHook, type RevocationPublisher } from '../lib/revocation-hook.js';
import type { Logger } from '../observability/index.js';
import { METRIC_PREFIX } from '../observability/index.js';

/** One revocation as the log holds it; `revocation` is null when the entry could not be read. */
export interface InvalidationEntry {
  readonly position: string;
  readonly origin: string;
  readonly revocation: Revocation | null;
}

/**
 * What a read of the log says, facts only: the decisions about them are {@link FleetInvalidation}'s.
 * `trimmed`: an entry after the position read from was removed before it was read (the reader fell
 * behind the log's retention); `rewound`: the log's head is before the position read from (a
 * failover lost entries).
 */
export interface InvalidationPage {
  /** Changes when the log was lost and started again (a store that restarted empty). */
  readonly epoch: string;
  /** When the epoch was made (the store's clock, ms), or null when the store does not say. */
  readonly epochBornMs: number | null;
  /** Position of the newest entry ever written (the start when none). */
  readonly head: string;
  readonly trimmed: boolean;
  readonly rewound: boolean;
  readonly entries: readonly InvalidationEntry[];
}

/**
 * The shared, bounded, ordered log of revocations every replica reads from the last position it
 * saw (implemented in `src/redis/` by a stream). A nudge tells readers there is something new;
 * the log itself is what they trust to catch up after any gap.
 */
export interface InvalidationLog {
  /** Appends and nudges readers; rejects when it is not known to be written. */
  append(origin: string, revocation: Revocation): Promise<void>;
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
}

/** Why a replica purged its whole cache instead of catching up (`cause` label). */
export type CatchUpPurgeCause = 'reset' | 'trimmed' | 'rewound' | 'unreadable';

export interface InvalidationMetrics {
  readonly published: Counter<'outcome'>;
  readonly received: Counter<'scope'>;
  /** Whole-cache purges because a replica could not tell what it missed, by cause. */
  readonly purges: Counter<'cause'>;
}

/** Declares the fan-out's metrics against an injected registry. */
export function createInvalidationMetrics(registry: Registry): InvalidationMetrics {
  const registers = [registry];
  const purges = new Counter({
    name: `${METRIC_PREFIX}cache_reconnect_purges_total`,
    help: 'Whole-cache purges because this replica could not tell which revocations it missed, by cause (reset, trimmed, rewound, unreadable).',
    labelNames: ['cause'],
    registers,
  });
  for (const cause of ['reset', 'trimmed', 'rewound', 'unreadable'] satisfies CatchUpPurgeCause[]) purges.labels(cause);
  return {
    published: new Counter({
      name: `${METRIC_PREFIX}cache_invalidations_published_total`,
      help: 'Revocations shared with the other replicas, by outcome (ok, failed).',
      labelNames: ['outcome'],
      registers,
    }),
    received: new Counter({
      name: `${METRIC_PREFIX}cache_invalidations_received_total`,
      help: 'Revocations received from other replicas, by scope (user, all).',
      labelNames: ['scope'],
      registers,
    }),
    purges,
  };
}

/** How often a replica reads the log even without a nudge (ms): the bound on a lost nudge. */
export const INVALIDATION_POLL_INTERVAL_MS = 1000;
/** Entries read per call. */
const READ_BATCH = 500;
/**
 * A replica that could not read the log at start reads, at first contact, what was written since
 * it started minus this much (ms): room for the store's clock to be behind ours.
 */
export const START_CLOCK_SLACK_MS = 60_000;

export interface FleetInvalidationOptions {
  readonly log: InvalidationLog;
  /** This replica's cache. */
  readonly local: RevocationHook;
  readonly metrics: InvalidationMetrics;
  readonly logger: Logger;
  /** Tells this replica's own entries apart (a random id by default). */
  readonly replicaId?: string;
  readonly pollIntervalMs?: number;
  /** Epoch ms (when this replica started: see {@link START_CLOCK_SLACK_MS}). */
  readonly now?: () => number;
  /** How far the store's clock may be behind ours (ms); {@link START_CLOCK_SLACK_MS} by default. */
  readonly clockSlackMs?: number;
}

/**
 * Keeps this replica's cache as true as the fleet's (contract, Several replicas): a revocation is
 * purged here at once and appended to the shared log; the other replicas read the log from the
 * last position they saw, on a nudge and at least every second. A stall, a reconnect or a failover
 * that lost nothing costs no cache: the replica reads what it missed. It purges everything only when
 * it cannot tell what it missed (the log restarted empty, it fell behind the log's retention, a
 * failover rewound the log, an entry it cannot read), counted by cause.
 */
export class FleetInvalidation implements RevocationPublisher {
  private readonly replicaId: string;
  private epoch: string | null = null;
  private position: string | null = null;
  /** The log's epoch and head are known: reads go on from {@link position}. */
  private synced = false;
  /** The read made by start(), before anything is cached. */
  private inStart = false;
  private running: Promise<void> | null = null;
  private again = false;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  private readonly startedAtMs: number;

  constructor(private readonly options: FleetInvalidationOptions) {
    this.replicaId = options.replicaId ?? randomUUID();
    this.startedAtMs = (options.now ?? Date.now)();
  }

  /**
   * Subscribes, reads the head and starts the poll; never waits longer than one read. Call before
   * anything is cached: a read made until it returns is this replica's starting point.
   */
  async start(): Promise<void> {
    const { log } = this.options;
    this.inStart = true;
    try {
      log.onRestored(() => void this.catchUp());
      await log.onAppended(() => void this.catchUp());
      await this.catchUp();
    } finally {
      this.inStart = false;
    }
    this.timer = setInterval(() => void this.catchUp(), this.options.pollIntervalMs ?? INVALIDATION_POLL_INTERVAL_MS);
    this.timer.unref();
  }

  publish(revocation: Revocation): Promise<void> {
    applyTo(this.options.local, revocation);
    return this.options.log.append(this.replicaId, revocation).then(
      () => void this.options.metrics.published.inc({ outcome: 'ok' }),
      (err: unknown) => {
        this.options.metrics.published.inc({ outcome: 'failed' });
        throw err;
      },
    );
  }

  close(): void {
    this.closed = true;
    clearInterval(this.timer);
  }

  /** Reads what is new; calls that come while a read runs make one more read after it (and share its promise). */
  private catchUp(): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = this.read().finally(() => (this.running = null));
    return this.running;
  }

  private async read(): Promise<void> {
    try {
      for (;;) {
        this.again = false;
        const { log } = this.options;
        const page = this.synced
          ? await log.readAfter(this.position, READ_BATCH)
          : this.inStart
            ? await log.readAfter(null, READ_BATCH)
            : await log.readSince(this.startedAtMs - this.clockSlackMs, READ_BATCH);
        const more = this.apply(page);
        if (!more && !this.again) return;
      }
    } catch {
      // The store did not answer: the next nudge, poll or restore reads again from the same position.
    }
  }

  /** True when the page was full (more to read). */
  private apply(page: InvalidationPage): boolean {
    if (!this.synced) {
      // First contact. At start the cache is empty and the head is where this replica begins. A
      // replica that could not read the log at start has served since: it applies what was
      // written since it started (a slow Redis at start costs no cache), and purges only when it
      // cannot tell (some of that is gone, or more than one read of it).
      if (!this.inStart) {
        if (page.trimmed || page.entries.length >= READ_BATCH || this.bornSinceStart(page)) this.purgeAll('reset');
        else this.applyEntries(page.entries);
      }
      this.synced = true;
      this.epoch = page.epoch;
      this.position = page.head;
      return false;
    }
    if (page.epoch !== this.epoch) return this.restartAt(page, 'reset');
    if (page.trimmed) return this.restartAt(page, 'trimmed');
    if (page.rewound) return this.restartAt(page, 'rewound');
    this.applyEntries(page.entries);
    return page.entries.length >= READ_BATCH;
  }

  /**
   * A log born after this replica started (or whose birth it cannot tell) may have replaced one
   * this replica never read: the store restarted empty while this replica could not reach it, and
   * what was written before is gone. It cannot tell what it missed.
   */
  private bornSinceStart(page: InvalidationPage): boolean {
    return page.epochBornMs === null || page.epochBornMs >= this.startedAtMs - this.clockSlackMs;
  }

  private get clockSlackMs(): number {
    return this.options.clockSlackMs ?? START_CLOCK_SLACK_MS;
  }

  private applyEntries(entries: readonly InvalidationEntry[]): void {
    for (const entry of entries) {
      this.position = entry.position;
      if (entry.origin === this.replicaId) continue;
      if (!entry.revocation) {
        this.purgeAll('unreadable');
        continue;
      }
      applyTo(this.options.local, entry.revocation);
      this.options.metrics.received.inc({ scope: entry.revocation.scope });
    }
  }

  private restartAt(page: InvalidationPage, cause: CatchUpPurgeCause): boolean {
    this.purgeAll(cause);
    this.epoch = page.epoch;
    this.position = page.head;
    return false;
  }

  private purgeAll(cause: CatchUpPurgeCause): void {
    const entries = this.options.local.revokeAll();
    // Counted even when nothing was cached: it says this replica could not tell what it missed.
    this.options.metrics.purges.inc({ cause });
    this.options.logger[entries > 0 ? 'warn' : 'info'](
      { event: 'cache_purged_on_reconnect', cause, entries },
      `whole cache purged: this replica cannot tell which revocations it missed (${cause})`,
    );
  }
}
