import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import { RateLimiter } from '../observability/rate-limited-log.js';
import type { EnqueueResult, EventQueue, QueuedEvent } from './event-queue.js';
import { DeliveredRecord } from './delivered-record.js';
import { MarkerMacs } from './markers.js';
import { QueueIngress } from './queue-ingress.js';
import type { QueueBatch, QueueEntry, ReadBounds } from './queue-store.js';
import { QueueDelivery, type HandledOutcome } from './queue-delivery.js';
import { RouterDirectory } from './queue-routers.js';
import { QueueUpkeep } from './queue-upkeep.js';
import { QUEUE_CONCURRENCY, QUEUE_POLL_INTERVAL_MS, QUEUE_READ_BATCH_BYTES, QUEUE_STALE_CONSUMER_MS, type QueueWorkerOptions } from './queue-worker-options.js';

export { QUEUE_CONCURRENCY, QUEUE_POLL_INTERVAL_MS, QUEUE_READ_BATCH_BYTES, QUEUE_STALE_CONSUMER_MS, type QueueWorkerOptions } from './queue-worker-options.js';
import { decodeStored, storedDeliveryMaxBytes, type StoredDelivery } from './stored-delivery.js';

const ERROR_LOG_INTERVAL_MS = 30_000;
/** What an entry's handling may end in without a failure: delivered, or given to the replica whose routes take it, or of a type this one ignores. */
const SETTLED_WELL: ReadonlySet<HandledOutcome> = new Set(['delivered', 'handed_over', 'ignored']);

/**
 * Queue mode's policy (contract, Webhooks `queue` and Several replicas). {@link enqueue} is the
 * ingress's side; the workers, started by {@link start} in every replica, are the other:
 *
 * - new entries are read (a wake message, or the 250 ms poll, starts a read), each forwarded to
 *   this replica's app; a 2xx marks it delivered, a failure parks it for its backoff, and past the
 *   horizon it becomes a dead letter with its last error;
 * - **nothing from the store is trusted**: each entry is parsed and verified again (HMAC over the
 *   stored timestamp and raw body, current secrets, no ±300 s window, and the signed id must be the
 *   entry's) before every forward; a mismatch is dead-lettered as `signature_mismatch`, never
 *   forwarded; the headers the app gets are rebuilt from an allow-list;
 * - **nothing is stranded**: a read whose reply was lost may still have made entries this
 *   consumer's; after any failed call, and when the store answers again, the worker reads its own
 *   pending entries at once instead of waiting for another replica's takeover;
 * - entries held by a consumer that died are taken over once idle `visibilityMs`; the delivered
 *   marker, checked before each forward, drops a copy the app has had;
 * - **replicas may route differently** (a rollout): an entry no route of this replica takes is
 *   handed to a live replica whose routes take it (each files its route table, {@link RouterDirectory}),
 *   which is told and reads its own pending entries at once; with none it waits (see `QueueDelivery`);
 * - **a slow answer is not a fresh one**: Redis starts an entry's visibility when it runs the read,
 *   so a reply this process reads late (it stalled) leaves less than the visibility; an entry whose
 *   forward could no longer end inside it (`visibilityMs - forwardTimeoutMs` after the read was
 *   sent) is not forwarded but read again from this consumer's pending entries, which starts its
 *   visibility afresh (`read_too_late`).
 */
export class QueueWorker implements EventQueue {
  /** This process's consumer name. */
  readonly consumer = `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  /** Entries being handled here, by entry id. */
  private readonly active = new Map<string, Promise<void>>();
  /**
   * When the handling of an entry ended here (`performance.now()`), kept while a read sent before
   * then may still answer: its reply shows the entry as it was before that handling moved it.
   */
  private readonly settledAt = new Map<string, number>();
  /** Forwarded and accepted by the app, not yet recorded in the store: entry id → event id. */
  private readonly unrecorded = new Map<string, string>();
  private readonly errorLog = new RateLimiter(ERROR_LOG_INTERVAL_MS);
  private readonly delivery: QueueDelivery;
  private readonly ingress: QueueIngress;
  private readonly record: DeliveredRecord;
  private readonly bounds: ReadBounds;
  private readonly concurrency: number;
  private readonly pollIntervalMs: number;
  private timer: NodeJS.Timeout | undefined;
  private pumping = false;
  private again = false;
  private stopped = false;
  /** Own pending entries may exist that no forward is handling: read them. */
  private recoverPending = true;
  /**
   * Reasons so far to read own pending entries (failed calls, entries read too late): a recovery
   * read clears {@link recoverPending} only if none came while it ran.
   */
  private recoverReasons = 0;
  private lastTakeOver = 0;
  private readonly upkeep: QueueUpkeep;
  private readonly routers: RouterDirectory;

  constructor(private readonly options: QueueWorkerOptions) {
    if (!(options.visibilityMs > options.forwardTimeoutMs)) throw new RangeError('QueueWorker: visibilityMs must exceed forwardTimeoutMs');
    if (!(options.horizonMs > 0) || !(options.deliveredRetentionMs > 0)) throw new RangeError('QueueWorker: horizonMs and deliveredRetentionMs must be > 0');
    const macs = new MarkerMacs(options.secrets);
    const toleranceMs = options.toleranceS * 1000;
    // A re-added copy is recognised as long as it could still be forwarded: its signature's age
    // may reach the horizon plus the tolerance, counted from up to a tolerance before we saw it.
    const markerTtlMs = Math.max(options.deliveredRetentionMs, options.horizonMs + 2 * toleranceMs);
    const { store, logger, metrics, now } = options;
    this.record = new DeliveredRecord({ store, macs, ttlMs: markerTtlMs, maxEntries: options.deliveredMaxEntries ?? 1_000_000, mismatches: metrics.markerMismatches, logger, now });
    this.routers = new RouterDirectory({ store, consumer: this.consumer, globs: options.routes.globs, macs, mismatches: metrics.markerMismatches, now });
    this.delivery = new QueueDelivery({ ...options, consumer: this.consumer, unrecorded: this.unrecorded, record: this.record, routers: this.routers, macs, markerTtlMs, maxAgeMs: options.horizonMs + toleranceMs });
    this.ingress = new QueueIngress({ store, macs, metrics, retentionMs: options.deliveredRetentionMs, now });
    const entryBytes = storedDeliveryMaxBytes(options.maxBodyBytes);
    this.bounds = { entryBytes, batchBytes: Math.max(QUEUE_READ_BATCH_BYTES, entryBytes) };
    this.concurrency = options.concurrency ?? QUEUE_CONCURRENCY;
    this.pollIntervalMs = options.pollIntervalMs ?? QUEUE_POLL_INTERVAL_MS;
    const staleConsumerMs = options.staleConsumerMs ?? QUEUE_STALE_CONSUMER_MS;
    this.upkeep = new QueueUpkeep({ store, routers: this.routers, metrics, consumer: this.consumer, pollIntervalMs: this.pollIntervalMs, staleConsumerMs });
  }

  /** Starts the workers; never waits for the store. */
  async start(): Promise<void> {
    const { store } = this.options;
    store.onRestored(() => {
      this.recoverPending = true;
      this.kick();
    });
    this.timer = setInterval(() => this.kick(), this.pollIntervalMs);
    this.timer.unref();
    await store.onWake(() => this.kick());
    // Another replica gave this one an entry its own routes do not take: it is pending here now.
    await store.onHandedOver(this.consumer, () => {
      this.recoverLater();
      this.kick();
    });
    await this.record.start();
    this.kick();
  }

  /** The ingress's side (see {@link QueueIngress}). */
  enqueue(event: QueuedEvent): Promise<EnqueueResult> {
    return this.ingress.enqueue(event);
  }

  /**
   * Stops taking events and gives those in flight up to `graceMs` to finish; what is unfinished
   * stays pending in the store and is taken over by another replica after `visibilityMs` (the
   * wing's app client, destroyed after this, cuts the forwards still running).
   */
  async stop(graceMs = 0): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    // Nothing more is handed to a worker that stops (what was is taken over after the visibility).
    const withdrawn = this.routers.withdraw().catch(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled([...this.active.values(), withdrawn]), new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)))]);
    clearTimeout(timer);
  }

  private kick(): void {
    if (this.stopped) return;
    if (this.pumping) {
      this.again = true;
      return;
    }
    this.pumping = true;
    void this.pump().finally(() => {
      this.pumping = false;
      if (this.again) {
        this.again = false;
        this.kick();
      }
    });
  }

  /** One round: each step on its own, so one that fails (a slow store) does not keep the others from running. */
  private async pump(): Promise<void> {
    const { store } = this.options;
    const now = this.options.now();
    await this.step('record', () => this.delivery.recordDelivered((entryId) => this.active.has(entryId)));
    const step = (where: string, work: () => Promise<unknown>): Promise<void> => this.step(where, work);
    await this.upkeep.advertise(now, step);
    if (this.recoverPending && this.free() > 0) await this.step('recover', () => this.recover());
    await this.upkeep.promote(now, step);
    if (this.free() > 0 && now - this.lastTakeOver >= this.pollIntervalMs) {
      this.lastTakeOver = now;
      await this.step('take_over', async () => {
        const askedAt = this.readSent();
        const taken = this.bounded(await store.takeOver(this.consumer, this.options.visibilityMs, this.free(), this.bounds));
        if (taken.length > 0) this.options.logger.info({ event: 'webhook_queue_taken_over', events: taken.length }, 'events abandoned by another replica taken over');
        await this.dispatchBatch(taken, askedAt);
      });
    }
    await this.step('read', async () => {
      while (this.free() > 0 && !this.stopped) {
        const askedAt = this.readSent();
        const entries = this.bounded(await store.readNew(this.consumer, this.free(), this.bounds));
        if (entries.length === 0) break;
        await this.dispatchBatch(entries, askedAt);
      }
    });
    await this.upkeep.report(now, step);
  }

  private async step(where: string, work: () => Promise<unknown>): Promise<void> {
    try {
      await work();
    } catch (err) {
      this.failed(where, err);
    }
  }

  /**
   * A call failed: whatever it may have made ours (a read whose reply was lost) is read back by the
   * next pump (the poll, a wake, or the store answering again), not in a loop while it is away.
   */
  private failed(where: string, err: unknown): void {
    this.recoverLater();
    this.logError(where, err);
  }

  /** Reads this consumer's own pending entries and takes up those nothing here is handling. */
  private async recover(): Promise<void> {
    const reasonsBefore = this.recoverReasons;
    let after = '0-0';
    for (;;) {
      const free = this.free();
      if (free <= 0) return; // the flag stays: the rest is read when slots free up
      const askedAt = this.readSent();
      const entries = this.bounded(await this.options.store.readPending(this.consumer, free + this.active.size, after, this.bounds));
      if (entries.length === 0) break;
      const orphans = entries.filter((e) => !this.active.has(e.entryId));
      if (orphans.length > 0) {
        this.options.logger.info({ event: 'webhook_queue_recovered', events: orphans.length }, 'own pending events taken up again after a lost or late reply');
        await this.dispatchBatch(orphans, askedAt);
      }
      after = entries[entries.length - 1]!.entryId;
    }
    if (this.recoverReasons === reasonsBefore) this.recoverPending = false;
  }

  /** The entries of a read; those it dead-lettered in the store as too large are counted (never seen here). */
  private bounded(batch: QueueBatch): QueueEntry[] {
    if (batch.oversized > 0) {
      this.options.metrics.forwards.inc({ outcome: 'oversized' }, batch.oversized);
      this.logError('oversized', { code: 'oversized', message: `${batch.oversized} queue entries larger than --webhook-max-body-bytes allows were dead-lettered unread` });
    }
    return batch.entries;
  }

  private free(): number {
    return this.concurrency - this.active.size;
  }

  /**
   * Starts a batch: entries the app accepted before (a copy, or a takeover after a crash that
   * followed the app's 2xx) are dropped, never forwarded; those accepted here but not yet recorded
   * are recorded. `askedAt`: when the read that returned them was sent (`performance.now()`).
   */
  private async dispatchBatch(entries: readonly QueueEntry[], askedAt: number): Promise<void> {
    const startBy = askedAt + this.options.visibilityMs - this.options.forwardTimeoutMs;
    const decoded = entries.map((e) => ({ entry: e, stored: decodeStored(e.json) }));
    const readable = decoded.filter((d) => d.stored !== null);
    const seen = readable.length === 0 ? [] : await this.record.before(readable.map((d) => d.stored!.id));
    const before = new Set(readable.filter((_d, i) => seen[i] === true).map((d) => d.entry.entryId));
    for (const { entry, stored } of decoded) {
      if (this.active.has(entry.entryId)) continue;
      if (this.unrecorded.has(entry.entryId)) continue; // recordDelivered() settles it
      // Handled here since this read was sent (parked for a retry, delivered, dead-lettered): the
      // reply may predate that move, and forwarding from it would run beside the retry's forward on
      // another replica. If the entry is still ours after all, reading own pending entries finds it.
      if ((this.settledAt.get(entry.entryId) ?? -Infinity) >= askedAt) {
        this.recoverLater();
        continue;
      }
      this.run(entry.entryId, before.has(entry.entryId) ? this.delivery.dropDelivered(entry, stored!) : this.handle(entry, stored, startBy));
    }
  }

  /**
   * The moment a read of entries is sent. Reads go one at a time (one pump runs at once, its reads
   * in turn), so what settled before this one is no concern of its reply or of any later one.
   */
  private readSent(): number {
    const now = performance.now();
    for (const [entryId, at] of this.settledAt) if (at < now) this.settledAt.delete(entryId);
    return now;
  }

  /** One entry forwarded (or parked): with spans on, a root span per attempt with its outcome. */
  private async handle(entry: QueueEntry, stored: StoredDelivery | null, startBy: number): Promise<void> {
    const tracing = this.options.tracing;
    const work = (): Promise<HandledOutcome> => this.delivery.handle(entry, stored, startBy);
    const outcome = await (tracing ? tracing.run('consent.webhook.queue.forward', work, (o) => ({ outcome: o, failed: !SETTLED_WELL.has(o) })) : work());
    // Still pending here: read again (that starts its visibility afresh) once this slot is free.
    if (outcome === 'read_too_late' || outcome === 'claim_unknown') this.recoverLater();
  }

  /** Own pending entries may exist that nothing here handles: the next pump reads them. */
  private recoverLater(): void {
    this.recoverReasons++;
    this.recoverPending = true;
  }

  private run(entryId: string, work: Promise<void>): void {
    const running = work
      .catch((err: unknown) => this.failed('handle', err))
      .finally(() => {
        this.active.delete(entryId);
        this.settledAt.set(entryId, performance.now());
        // Read again once a quarter of the slots are free: batches, not one read per event.
        if (this.active.size <= this.concurrency - Math.max(1, Math.floor(this.concurrency / 4))) this.kick();
      });
    this.active.set(entryId, running);
  }

  private logError(where: string, err: unknown): void {
    if (this.stopped) return;
    const code = (err as { code?: unknown })?.code;
    const suppressed = this.errorLog.admit(`${where}:${typeof code === 'string' ? code : 'error'}`);
    if (suppressed === undefined) return;
    this.options.logger.warn({ event: 'webhook_queue_error', where, code, suppressed }, `webhook queue ${where} failed: ${(err as Error)?.message ?? String(err)}`);
  }
}
