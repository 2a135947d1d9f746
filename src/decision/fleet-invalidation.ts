import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { applyTo, type Revocation, type RevocationHook, type RevocationPublisher } from '../lib/revocation-hook.js';
import { storeRefused } from '../lib/store-failure.js';
import type { Logger } from '../observability/index.js';
import { RateLimiter } from '../observability/rate-limited-log.js';
import type { CacheTrust } from './cache-trust.js';
import type { InvalidationEntry, InvalidationLog, InvalidationPage } from './invalidation-log.js';
import type { CatchUpPurgeCause, InvalidationMetrics } from './invalidation-metrics.js';
import { sealSubject, type EntryMacs, type EntryPlace } from './invalidation-seal.js';

/** How often a replica reads the log even without a nudge (ms): the bound on a lost nudge. */
export const INVALIDATION_POLL_INTERVAL_MS = 1000;
/** Entries read per call. */
const READ_BATCH = 500;
/**
 * A replica that could not read the log at start reads, at first contact, what was written since
 * it started minus this much (ms): room for the store's clock to be behind ours.
 */
export const START_CLOCK_SLACK_MS = 60_000;
/** At most one line per kind of failed read per this interval (ms); the counter has them all. */
const READ_FAILURE_LOG_INTERVAL_MS = 30_000;

export interface FleetInvalidationOptions {
  readonly log: InvalidationLog;
  /** This replica's cache. */
  readonly local: RevocationHook;
  /**
   * Seals this replica's entries and verifies everyone's (keyed from the webhook secrets): an entry
   * that does not verify is a revocation of unknown scope.
   */
  readonly macs: EntryMacs;
  readonly metrics: InvalidationMetrics;
  readonly logger: Logger;
  /**
   * `--fleet-invalidation-max-silence-ms`: past this long without a complete read of the log while
   * the store answers (others may be answered 200 for revocations this replica cannot see), the
   * cache serves nothing (see {@link trust}) until a read catches up.
   */
  readonly maxSilenceMs: number;
  /** The gate the decision service reads before serving a hit; this class sets it. */
  readonly trust?: CacheTrust;
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
 * it cannot tell what it missed (the log restarted empty, it fell behind the log's retention, an
 * entry after its position was removed however it was removed, a failover rewound the log, an entry
 * it cannot read, an entry whose MAC does not verify), counted by cause.
 *
 * A read that fails is counted and logged (rate-limited). When reads have failed for longer than
 * `maxSilenceMs` while the store kept answering (an error reply, or other commands: a store that
 * answers may hold a revocation another replica was answered 200 for), the cache serves nothing
 * until a read reaches the head. A store that answers nobody leaves the cache serving: then no
 * replica can have a revocation acknowledged either.
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
  /** performance.now() when the last read that reached the head was sent. */
  private caughtUpAt = performance.now();
  private readonly failureLog = new RateLimiter(READ_FAILURE_LOG_INTERVAL_MS);

  constructor(private readonly options: FleetInvalidationOptions) {
    if (!(options.maxSilenceMs > 0)) throw new RangeError('FleetInvalidation: maxSilenceMs must be > 0');
    this.replicaId = options.replicaId ?? randomUUID();
    this.startedAtMs = (options.now ?? Date.now)();
    options.metrics.bypassed.set(0);
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
    const seal = (place: EntryPlace): string | null => this.options.macs.sign(sealSubject(place, this.replicaId, revocation));
    return this.options.log.append(this.replicaId, revocation, seal).then(
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
    for (;;) {
      this.again = false;
      const { log } = this.options;
      const sentAt = performance.now();
      let page: InvalidationPage;
      try {
        page = this.synced
          ? await log.readAfter(this.position, READ_BATCH)
          : this.inStart
            ? await log.readAfter(null, READ_BATCH)
            : await log.readSince(this.startedAtMs - this.clockSlackMs, READ_BATCH);
      } catch (err) {
        // The next nudge, poll or restore reads again from the same position.
        this.readFailed(err, sentAt);
        return;
      }
      const more = this.apply(page);
      if (!more) this.caughtUp(sentAt);
      if (!more && !this.again) return;
    }
  }

  /** Everything written before `sentAt` has been applied (or purged for). */
  private caughtUp(sentAt: number): void {
    this.caughtUpAt = sentAt;
    const trust = this.options.trust;
    if (!trust || trust.trusted) return;
    trust.trusted = true;
    this.options.metrics.bypassed.set(0);
    this.options.logger.info({ event: 'cache_trusted_again' }, 'the invalidation log is read again: the cache serves again');
  }

  private readFailed(err: unknown, sentAt: number): void {
    const { metrics, logger, log, maxSilenceMs } = this.options;
    const kind = storeRefused(err) ? 'refused' : 'no_answer';
    metrics.readFailures.inc({ kind });
    const code = (err as { code?: unknown })?.code;
    const label = typeof code === 'string' ? code : 'error';
    const suppressed = this.failureLog.admit(label);
    if (suppressed !== undefined) {
      logger.warn({ event: 'cache_invalidation_read_failed', kind, code: label, suppressed }, `could not read the invalidation log (${kind}): ${(err as Error)?.message ?? String(err)}`);
    }
    const now = performance.now();
    // The store answered after this read was sent (its refusal, or another command): it serves
    // others, who may have had a revocation acknowledged that this replica cannot read.
    const storeAnswers = now - log.silentForMs() >= sentAt;
    const trust = this.options.trust;
    if (!trust?.trusted || !storeAnswers || now - this.caughtUpAt <= maxSilenceMs) return;
    trust.trusted = false;
    metrics.bypassed.set(1);
    logger.warn(
      { event: 'cache_bypassed', silentMs: Math.round(now - this.caughtUpAt), maxSilenceMs },
      'the invalidation log could not be read for longer than --fleet-invalidation-max-silence-ms while Redis answers: the cache serves nothing until it is read again',
    );
  }

  /** True when the page was full (more to read). */
  private apply(page: InvalidationPage): boolean {
    if (!this.synced) {
      // First contact. At start the cache is empty and the head is where this replica begins. A
      // replica that could not read the log at start has served since: it applies what was
      // written since it started (a slow Redis at start costs no cache), and purges only when it
      // cannot tell (some of that is gone, or more than one read of it).
      if (!this.inStart) {
        if (page.trimmed || page.deleted || page.entries.length >= READ_BATCH || this.bornSinceStart(page)) this.purgeAll('reset');
        else this.applyEntries(page);
      }
      this.synced = true;
      this.epoch = page.epoch;
      this.position = page.head;
      return false;
    }
    if (page.epoch !== this.epoch) return this.restartAt(page, 'reset');
    if (page.trimmed) return this.restartAt(page, 'trimmed');
    if (page.rewound) return this.restartAt(page, 'rewound');
    if (page.deleted) return this.restartAt(page, 'deleted');
    this.applyEntries(page);
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

  private applyEntries(page: InvalidationPage): void {
    for (const entry of page.entries) {
      this.position = entry.position;
      if (!entry.revocation) {
        this.purgeAll('unreadable');
        continue;
      }
      // Nothing an entry says (its origin included: an entry naming this replica is skipped) is
      // believed before its MAC verifies: a Redis writer rewrites entries in place, and copies one
      // entry's fields, MAC and all, onto another id. One that does not verify revoked something.
      if (!this.authentic(page.epoch, entry, entry.revocation)) {
        this.purgeAll('unauthenticated');
        continue;
      }
      if (entry.origin === this.replicaId) continue;
      applyTo(this.options.local, entry.revocation);
      this.options.metrics.received.inc({ scope: entry.revocation.scope });
    }
  }

  private authentic(epoch: string, entry: InvalidationEntry, revocation: Revocation): boolean {
    return this.options.macs.verify(sealSubject({ epoch, id: entry.id }, entry.origin, revocation), entry.mac);
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
