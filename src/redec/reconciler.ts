import type { Tracing } from '../observability/tracing.js';
import type { RedecReconcileConfig, UpstreamConfig } from '../config/index.js';
import type { Logger } from '../observability/index.js';
import { RedecError, type RedecErrorCode } from './errors.js';
import { identityOf } from './identity.js';
import type { ObligationLedger } from './ledger.js';
import type { ReconcileLease, RunSummary } from './lease.js';
import { dueIn, handToApp, type DeliverToApp, type HeldRecord, type Refusals } from './hand-off.js';
import { HeldRecords } from './held-records.js';
import { listNotificationRequirements, type NotificationRequirementItem } from './list-pending.js';
import type { RedecMetrics, RunOutcome } from './metrics.js';

export interface ReconcilerOptions {
  readonly upstream: UpstreamConfig;
  readonly config: RedecReconcileConfig;
  readonly ledger: ObligationLedger;
  readonly lease: ReconcileLease;
  /** Null without `--app-webhook-url`: obligations are listed and measured, not handed. */
  readonly deliver: DeliverToApp | null;
  readonly metrics: RedecMetrics;
  readonly logger: Logger;
  readonly now: () => number;
  /** Each run as a span of its own (spans on); off by default. */
  readonly tracing?: Pick<Tracing, 'run'>;
}

/** The lease lapsed under a run, or Redis failed: the run stops and counts as this. */
class RunAborted extends Error {
  constructor(readonly outcome: RunOutcome, message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

const outcomeOfListing = (code: RedecErrorCode): RunOutcome =>
  (
    ({
      ERR_REDEC_NETWORK: 'network',
      ERR_REDEC_TIMEOUT: 'timeout',
      ERR_REDEC_HTTP_STATUS: 'http_status',
      ERR_REDEC_MALFORMED_PAGE: 'malformed_page',
      ERR_REDEC_CURSOR_LOOP: 'cursor_loop',
      ERR_REDEC_TOO_LARGE: 'too_large',
    }) as const
  )[code];

/**
 * REDEC reconciliation (CONTRACT.md): every `intervalMs`, lists every pending obligation (all pages),
 * remembers when each was first seen, and hands each one still pending `graceMs` after that to the
 * app once (again after `repeatMs` if still pending) as a `consent_sidecar.redec.notification_pending`
 * event marked `x-consent-sidecar-reconciled: 1`. Obligations that left the listing are forgotten.
 *
 * A failed run (listing, Redis, lease) is counted, logged, and forgets nothing; the next run starts
 * over. Nothing it meets throws out of its timer.
 *
 * @example
 * const r = new Reconciler({ upstream, config, ledger: new MemoryLedger(), lease: new LocalLease(), deliver, metrics, logger, now: Date.now });
 * r.start(); // … await r.close();
 */
export class Reconciler {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<RunOutcome> | undefined;
  private readonly stop = new AbortController();
  private closed = false;
  private loggedField: string | undefined;
  private oldest: number | null = null;

  constructor(private readonly options: ReconcilerOptions) {
    if (!(options.config.intervalMs > 0)) throw new RangeError('Reconciler: intervalMs must be > 0 (0 means: do not build one)');
  }

  /** First-seen time (epoch ms) of the oldest pending obligation as last known, for the age gauge. */
  get oldestFirstSeenAt(): number | null {
    return this.oldest;
  }

  /** Runs at once, then every `intervalMs` after the end of the previous run (runs never overlap). */
  start(): void {
    if (this.timer || this.closed) return;
    if (!this.options.deliver) {
      this.options.logger.warn({ event: 'redec_reconcile_no_app' }, 'REDEC reconciliation lists and measures pending obligations but hands none: --app-webhook-url is not set');
    }
    const tick = (): void => {
      this.timer = undefined;
      void this.runOnce().finally(() => {
        if (!this.closed) {
          this.timer = setTimeout(tick, this.options.config.intervalMs);
          this.timer.unref();
        }
      });
    };
    this.timer = setTimeout(tick, 0);
    this.timer.unref();
  }

  /** One run; never rejects. Resolves to its outcome (also counted). */
  runOnce(): Promise<RunOutcome> {
    const run = (): Promise<RunOutcome> => this.run();
    this.running ??= (this.options.tracing ? this.options.tracing.run('consent.redec.reconcile', run, (outcome) => ({ outcome, failed: outcome !== 'ok' && outcome !== 'skipped' })) : run()).finally(() => (this.running = undefined));
    return this.running;
  }

  /** Stops the timer, aborts a run in flight between pages, and waits for it. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.stop.abort();
    await this.running;
  }

  private async run(): Promise<RunOutcome> {
    const { metrics, logger, lease } = this.options;
    const started = this.options.now();
    let outcome: RunOutcome;
    let acquired = false;
    try {
      acquired = await this.redis(() => lease.acquire());
      if (!acquired) {
        const summary = await this.redis(() => lease.lastSummary());
        if (summary) this.report(summary);
        outcome = 'skipped';
      } else {
        const summary = await this.reconcile();
        await this.redis(() => lease.finish(summary));
        acquired = false;
        outcome = 'ok';
        logger.info({ event: 'redec_reconcile_run', outcome, pending: summary.pending, durationMs: this.options.now() - started }, 'REDEC reconcile run done');
      }
    } catch (err) {
      outcome = err instanceof RunAborted ? err.outcome : err instanceof RedecError ? outcomeOfListing(err.code) : 'error';
      if (acquired) await lease.finish(null).catch(() => undefined);
      if (!this.closed) {
        logger.warn(
          { event: 'redec_reconcile_run', outcome, code: (err as { code?: string }).code, durationMs: this.options.now() - started },
          `REDEC reconcile run failed (${(err as Error).message}); the next run starts over`,
        );
      }
    }
    // A run cut short because the sidecar is stopping is not a failure of the listing.
    if (outcome === 'ok' || outcome === 'skipped' || !this.closed) metrics.runs.labels(outcome).inc();
    return outcome;
  }

  /**
   * Lists, syncs the ledger, hands what is due. Nothing is synced or handed before the listing is
   * complete and within its bounds (a `too_large` run uses nothing of what it read). The records
   * are held as text up to `--redec-max-page-bytes` in all; a longer listing is held as identities
   * only, and what is due is handed from a second listing, page by page (memory: one page).
   */
  private async reconcile(): Promise<RunSummary> {
    const { config, ledger } = this.options;
    const held = new HeldRecords(config.bounds.maxPageBytes);
    const listing = this.list((bytes) => held.expectPage(bytes));
    try {
      for (;;) {
        // Not for-await: its binding would keep the last page alive while the next one is read.
        let step: IteratorResult<readonly NotificationRequirementItem[]> | null = await listing.next();
        if (step.done) break;
        held.addAll(step.value);
        step = null;
        await this.betweenPages('during the listing');
      }
    } finally {
      await listing.return(undefined);
    }
    const now = this.options.now();
    const entries = await this.redis(() => ledger.sync(held.identities(), now));
    let oldest: number | null = null;
    for (const e of entries.values()) if (oldest === null || e.firstSeenAt < oldest) oldest = e.firstSeenAt;
    const summary: RunSummary = { pending: held.size, oldestFirstSeenAt: oldest };
    this.report(summary);

    const due = [...entries]
      .filter(([, e]) => now - e.firstSeenAt >= config.graceMs && (e.handedAt === null || now - e.handedAt >= config.repeatMs))
      .map(([id]) => id);
    if (due.length === 0 || !this.options.deliver) return summary;
    const tally: Refusals = { count: 0, lastDetail: undefined };
    try {
      if (held.complete) await this.hand(due.map((id) => [id, held.json(id)!] as const), tally);
      else await this.handFromSecondListing(new Set(due), tally);
    } finally {
      // One line per run, not per obligation: an app that is down would otherwise flood the log.
      if (tally.count > 0) {
        this.options.logger.warn(
          { event: 'redec_handed_to_app', outcome: 'failed', count: tally.count, detail: tally.lastDetail },
          `the app did not accept ${tally.count} pending REDEC obligation(s); the next run hands them again`,
        );
      }
    }
    return summary;
  }

  /** The listing as this run reads it (bounded by `--redec-max-page-bytes`, `--redec-max-records`, `--redec-max-listing-bytes`). */
  private list(onPageBytes?: (bytes: number) => void): AsyncGenerator<readonly NotificationRequirementItem[]> {
    const { config } = this.options;
    return listNotificationRequirements(this.options.upstream, {
      ...(onPageBytes ? { onPageBytes } : {}),
      status: 'pending',
      limit: config.pageLimit,
      fields: config.fields,
      bounds: config.bounds,
      signal: this.stop.signal,
      onItemsField: (field) => this.logField(field),
    });
  }

  /** After each page: stop when the sidecar stops or the lease lapsed. */
  private async betweenPages(when: string): Promise<void> {
    if (this.closed) throw new RunAborted('error', 'the sidecar is stopping');
    if (!(await this.redis(() => this.options.lease.renew()))) throw new RunAborted('lease_lost', `the lease lapsed ${when}`);
  }

  /**
   * Lists again and hands each due record as its page arrives, until all are found or the listing
   * ends; one that left the listing meanwhile is no longer pending and is not handed.
   */
  private async handFromSecondListing(due: Set<string>, tally: Refusals): Promise<void> {
    const listing = this.list();
    try {
      for (;;) {
        const step = await listing.next();
        if (step.done) return;
        const batch = dueIn(step.value, due);
        if (batch.length > 0) await this.hand(batch, tally);
        if (due.size === 0) return;
        await this.betweenPages('while handing obligations');
      }
    } finally {
      // Ends a listing left before its last page (everything due was found).
      await listing.return(undefined);
    }
  }

  /** Hands `batch` to the app, recording what it accepted; stops with the run (lease lost, Redis, closing). */
  private hand(batch: readonly (readonly [string, HeldRecord])[], tally: Refusals): Promise<void> {
    const { deliver, metrics, ledger, lease, now } = this.options;
    return handToApp(batch, tally, {
      deliver: deliver!,
      metrics,
      now,
      markHanded: (ids, at) => this.redis(() => ledger.markHanded(ids, at)),
      stopped: () => this.closed,
      afterEach: async () => {
        if (!(await this.redis(() => lease.renew()))) throw new RunAborted('lease_lost', 'the lease lapsed while handing obligations');
      },
    });
  }

  private report(summary: RunSummary): void {
    this.oldest = summary.oldestFirstSeenAt;
    this.options.metrics.pending.set(summary.pending);
  }

  private logField(field: string): void {
    if (this.loggedField === field) return;
    this.loggedField = field;
    const { fields } = this.options.config;
    this.options.logger.info(
      { event: 'redec_listing_fields', itemsField: field, cursorParam: fields.cursorParam, configured: fields.itemsField !== null },
      `REDEC listing: records read from "${field}", cursor sent as "${fields.cursorParam}"`,
    );
  }

  /** A ledger or lease call; any failure aborts the run as `redis`. */
  private async redis<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      if (err instanceof RunAborted) throw err;
      throw new RunAborted('redis', `the reconciler's shared state failed: ${(err as Error).message}`, { cause: err });
    }
  }
}
