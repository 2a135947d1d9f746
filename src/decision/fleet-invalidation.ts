import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { applyTo, type Revocation, type RevocationHook, type RevocationPublisher } from '../lib/revocation-hook.js';
import { storeRefused } from '../lib/store-failure.js';
import type { Logger } from '../observability/index.js';
import { RateLimiter } from '../observability/rate-limited-log.js';
import type { CacheTrust } from './cache-trust.js';
import type { AppendedPlace, InvalidationEntry, InvalidationLog, InvalidationNudge, InvalidationPage } from './invalidation-log.js';
import type { CatchUpPurgeCause, InvalidationMetrics } from './invalidation-metrics.js';
import { chainSubject, entrySealer, sealSubject, type EntryMacs } from './invalidation-seal.js';
import { SubscriptionProof, type ProofTicket } from './subscription-proof.js';

/**
 * How often a replica reads the log while its subscription is not proven up, or it missed
 * something (ms): the bound on a revocation published meanwhile.
 */
export const INVALIDATION_POLL_INTERVAL_MS = 1000;
/**
 * How often a replica reads the log while its subscription is proven up and it missed nothing
 * (ms): every revocation published then reaches it as a nudge (a subscriber Redis cannot keep up
 * with is disconnected, not sent less), so this read only proves the subscription again and
 * checks Redis (see `RedisConnection`).
 */
export const INVALIDATION_QUIET_POLL_INTERVAL_MS = 30_000;
/**
 * How long a nudge that came before the one of an entry it follows waits for it (ms) before the
 * log is read: each appender publishes once its append is answered, so two appends close together
 * may be announced in the opposite order; one never announced (its appender failed between the two
 * steps, and answered the service 503) is read.
 */
export const INVALIDATION_REORDER_GRACE_MS = 250;
/** Entries read per call; also the most nudges held while a read is in flight (beyond, they are dropped and the log read again). */
const READ_BATCH = 500;
/**
 * A replica that could not read the log at start reads, at first contact, what was written since
 * it started minus this much (ms): room for the store's clock to be behind ours.
 */
export const START_CLOCK_SLACK_MS = 60_000;
/**
 * The keep-alive of a proven subscription, from `--fleet-invalidation-max-silence-ms`: an echo is
 * sent when the subscription delivered nothing for `everyMs`, and waited for `waitMs`; missed, the
 * log is read at once. A socket that died silently right after the last echo is found out by
 * `everyMs + waitMs` = 4/5 of the max silence, and the read takes what was missed then: a
 * revocation acknowledged elsewhere is applied here within the max silence (its read permitting).
 * Idle, that is one PUBLISH every `everyMs` (3 s at the default 5 s). Below a max silence of about
 * 1.25 s the floors (an echo at most every 200 ms, a wait of at least 50 ms) take over.
 */
export function keepAliveTimings(maxSilenceMs: number, echoWaitMs = 2000): { everyMs: number; waitMs: number } {
  // Floors for a max silence of a second or less, where the bound is not kept anyway: at most five echoes a second.
  const waitMs = Math.max(50, Math.min(echoWaitMs, Math.floor(maxSilenceMs / 5)));
  return { everyMs: Math.max(200, Math.floor(maxSilenceMs * 0.8) - waitMs), waitMs };
}
/** At most one line per kind of failed read per this interval (ms); the counter has them all. */
const READ_FAILURE_LOG_INTERVAL_MS = 30_000;

export interface FleetInvalidationOptions {
  readonly log: InvalidationLog;
  /** This replica's cache. */
  readonly local: RevocationHook;
  /**
   * Seals this replica's entries and verifies everyone's (keyed from the webhook secrets): an entry
   * that does not verify is a revocation of unknown scope, a nudge that does not verify is a reason to read.
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
  /** Default {@link INVALIDATION_POLL_INTERVAL_MS}. */
  readonly pollIntervalMs?: number;
  /** Default {@link INVALIDATION_QUIET_POLL_INTERVAL_MS}. */
  readonly quietPollIntervalMs?: number;
  /** Default `INVALIDATION_ECHO_WAIT_MS` (see {@link SubscriptionProof}). */
  readonly echoWaitMs?: number;
  /**
   * How long the subscription may go without delivering anything before a keep-alive echo is sent
   * (ms); default {@link keepAliveTimings}: with its wait, less than `maxSilenceMs`.
   */
  readonly keepAliveMs?: number;
  /** How long a keep-alive's echo may take (ms); default {@link keepAliveTimings}. */
  readonly keepAliveWaitMs?: number;
  /** Default {@link INVALIDATION_REORDER_GRACE_MS}. */
  readonly reorderGraceMs?: number;
  /** Epoch ms (when this replica started: see {@link START_CLOCK_SLACK_MS}). */
  readonly now?: () => number;
  /** How far the store's clock may be behind ours (ms); {@link START_CLOCK_SLACK_MS} by default. */
  readonly clockSlackMs?: number;
}

/** What waits while a read is in flight: a nudge, or where this replica's own append went. */
type Held = { readonly nudge: InvalidationNudge } | { readonly own: AppendedPlace };
type VerifiedEntry = NonNullable<InvalidationNudge['entry']>;
/** What came ahead of an entry this replica has not got yet (held for {@link INVALIDATION_REORDER_GRACE_MS}). */
type Ahead = { readonly entry: VerifiedEntry } | { readonly own: AppendedPlace };

/**
 * Keeps this replica's cache as true as the fleet's (contract, Several replicas): a revocation is
 * purged here at once and appended to the shared log; the nudge published after it carries the
 * entry, sealed with the id that was the log's last before it. A replica whose position is that
 * id applies it with no read. One that has not got that id yet holds the nudge for
 * {@link INVALIDATION_REORDER_GRACE_MS} (two appends close together may be announced in the
 * opposite order), then reads the log from its position, as it does at once when the nudge does
 * not verify: a forged or reordered nudge costs a read at most, never an entry skipped. The
 * revocation of a verified nudge held ahead is applied as it is when that read fails (or at once,
 * while reads are failing): a purge commutes with any other and repeating one is harmless; only
 * the position waits for the log. This replica's own entry moves it on from the append's answer, unread.
 *
 * While the subscription is proven up (a read that reached the head was echoed back on it, and
 * nothing since broke a connection or showed a nudge missing) and the replica missed nothing, it
 * reads the log only every {@link INVALIDATION_QUIET_POLL_INTERVAL_MS}; otherwise every
 * {@link INVALIDATION_POLL_INTERVAL_MS}, as on every nudge that shows a gap, every reconnect and
 * every restore. A proof holds only while the subscription keeps delivering: when it has delivered
 * nothing for a while, a keep-alive echo (one PUBLISH) proves it again, and one that does not come
 * back ends the proof and reads the log at once (see {@link keepAliveTimings}): a subscriber socket
 * that died silently costs at most the max silence, not the quiet poll. A stall, a reconnect or a failover that lost nothing costs no cache: the replica
 * reads what it missed. It purges everything only when it cannot tell what it missed (the log
 * restarted empty, it fell behind the log's retention, an entry after its position was removed
 * however it was removed, a failover rewound the log, an entry it cannot read, an entry whose MAC
 * does not verify), counted by cause.
 *
 * A read that fails is counted and logged (rate-limited). When reads have failed for longer than
 * `maxSilenceMs` while the store kept answering (an error reply, or other commands: a store that
 * answers may hold a revocation another replica was answered 200 for), the cache serves nothing
 * until a read reaches the head; the time counts from when this replica last knew it had
 * everything (a read that reached the head, or the subscription while it was proven up). A store
 * that answers nobody leaves the cache serving: then no replica can have a revocation acknowledged either.
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
  /** A read's request is in flight: nudges and own appends wait for its page ({@link held}). */
  private reading = false;
  private held: Held[] = [];
  private readonly appending = new Set<Promise<AppendedPlace>>();
  private timer: NodeJS.Timeout | undefined;
  private keepAliveTimer: NodeJS.Timeout | undefined;
  private readonly keepAliveMs: number;
  private readonly keepAliveWaitMs: number;
  private closed = false;
  private readonly startedAtMs: number;
  /**
   * performance.now() up to which everything written was applied (or purged for), while the
   * subscription is not proven up; while it is, that is the last thing it delivered (the proof's
   * `lastHeard`, kept fresh by the keep-alive).
   */
  private caughtUpAt = performance.now();
  /** Whether nudges are the whole log: the subscription proven up, nothing missed since. */
  private readonly proof: SubscriptionProof;
  /** The newest entry a verified nudge announced that this replica has not read: the next read must find it. */
  private announced: string | null = null;
  /** Nudges (verified) and own appends that came ahead of an entry this replica has not got, by id. */
  private readonly ahead = new Map<string, Ahead>();
  /**
   * Verified entries that came ahead and whose grace ended: the read that follows applies them in
   * order; if it fails, they are applied as they are (see {@link applyHeard}).
   */
  private readonly heardAhead = new Map<string, VerifiedEntry>();
  /** Ids (this epoch) of entries applied from their nudge ahead of the position: not applied again when reached. */
  private readonly appliedAhead = new Set<string>();
  /** The last read failed: a verified revocation heard ahead is applied at once. */
  private readsFailing = false;
  private graceTimer: NodeJS.Timeout | undefined;
  private readonly failureLog = new RateLimiter(READ_FAILURE_LOG_INTERVAL_MS);

  constructor(private readonly options: FleetInvalidationOptions) {
    if (!(options.maxSilenceMs > 0)) throw new RangeError('FleetInvalidation: maxSilenceMs must be > 0');
    this.replicaId = options.replicaId ?? randomUUID();
    this.startedAtMs = (options.now ?? Date.now)();
    const keepAlive = keepAliveTimings(options.maxSilenceMs, options.echoWaitMs);
    this.keepAliveMs = options.keepAliveMs ?? keepAlive.everyMs;
    this.keepAliveWaitMs = options.keepAliveWaitMs ?? keepAlive.waitMs;
    options.metrics.bypassed.set(0);
    options.metrics.subscribed.set(0);
    this.proof = new SubscriptionProof({
      ...(options.echoWaitMs !== undefined ? { echoWaitMs: options.echoWaitMs } : {}),
      changed: (live, since) => {
        if (!live) this.caughtUpAt = Math.max(this.caughtUpAt, since);
        options.metrics.subscribed.set(live ? 1 : 0);
        this.schedule();
      },
    });
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
      log.onDisturbed(() => this.disturbed());
      log.onEcho((token) => this.proof.echoed(token));
      await log.onAppended((nudge) => this.take({ nudge }));
      await this.catchUp();
    } finally {
      this.inStart = false;
    }
    this.schedule();
  }

  publish(revocation: Revocation): Promise<void> {
    applyTo(this.options.local, revocation);
    const appended = this.options.log.append(this.replicaId, revocation, entrySealer(this.options.macs, this.replicaId, revocation), this.synced ? this.position : null);
    this.appending.add(appended);
    return appended.then(
      (place) => {
        this.appending.delete(appended);
        this.options.metrics.published.inc({ outcome: 'ok' });
        this.take({ own: place });
      },
      (err: unknown) => {
        this.appending.delete(appended);
        this.options.metrics.published.inc({ outcome: 'failed' });
        throw err;
      },
    );
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    clearTimeout(this.keepAliveTimer);
    clearTimeout(this.graceTimer);
    this.proof.close();
  }

  /** Reads what is new; calls that come while a read runs make one more read after it (and share its promise). */
  private catchUp(): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = this.read().finally(() => {
      this.running = null;
      this.schedule();
    });
    return this.running;
  }

  /** The next read: soon while anything may have been missed, at the quiet pace while the subscription carries everything. */
  private schedule(): void {
    if (this.closed || this.inStart) return;
    clearTimeout(this.timer);
    const ms = this.proof.isLive ? (this.options.quietPollIntervalMs ?? INVALIDATION_QUIET_POLL_INTERVAL_MS) : (this.options.pollIntervalMs ?? INVALIDATION_POLL_INTERVAL_MS);
    this.timer = setTimeout(() => void this.catchUp(), ms);
    this.timer.unref();
    this.armKeepAlive();
  }

  /** While the subscription is proven up: a keep-alive once it has delivered nothing for {@link keepAliveMs}. */
  private armKeepAlive(): void {
    clearTimeout(this.keepAliveTimer);
    if (this.closed || this.inStart || !this.proof.isLive) return;
    const due = this.proof.lastHeard + this.keepAliveMs - performance.now();
    this.keepAliveTimer = setTimeout(() => this.keepAlive(), Math.max(due, 0));
    this.keepAliveTimer.unref();
  }

  /**
   * Nothing tells a subscriber socket that died silently (no RST: a NAT or conntrack entry lost)
   * from a quiet one: every nudge published since goes nowhere, and the quiet poll is 30 s away.
   * An echo on this replica's own channel (one PUBLISH) proves it delivers; one that does not come
   * back in time ends the proof, and the log is read at once (see {@link keepAliveTimings}).
   */
  private keepAlive(): void {
    if (this.closed || !this.proof.isLive) return;
    // A read in flight proves as much (its echo), or fails; either way it schedules the next one.
    if (this.running) return;
    if (performance.now() - this.proof.lastHeard < this.keepAliveMs) return this.armKeepAlive();
    const ticket = this.proof.ticket(randomUUID());
    const sent = this.proof.keepAlive(ticket, this.keepAliveWaitMs, (proven) => {
      if (this.closed) return;
      if (proven) this.armKeepAlive();
      else {
        this.options.metrics.keepAliveMisses.inc();
        void this.catchUp();
      }
    });
    if (!sent) return void (this.keepAliveTimer = setTimeout(() => this.keepAlive(), this.keepAliveWaitMs).unref());
    this.options.log.echo(ticket.token).catch(() => this.proof.echoFailed(ticket.token));
  }

  private async read(): Promise<void> {
    // This replica's own appends first: each answer says where its entry went, so the read goes on
    // after it (a replica without a key could not verify it, and would purge everything for it).
    if (this.appending.size > 0) await Promise.allSettled([...this.appending]);
    for (;;) {
      this.again = false;
      const { log } = this.options;
      const ticket = this.proof.ticket(randomUUID());
      const echo = ticket.token;
      let page: InvalidationPage;
      this.reading = true;
      try {
        page = this.synced
          ? await log.readAfter(this.position, READ_BATCH, { echo, announced: this.announced })
          : this.inStart
            ? await log.readAfter(null, READ_BATCH, { echo })
            : await log.readSince(this.startedAtMs - this.clockSlackMs, READ_BATCH, { echo });
      } catch (err) {
        // The next nudge, poll or restore reads again from the same position.
        this.reading = false;
        this.readsFailing = true;
        this.readFailed(err, ticket.sentAt);
        this.applyHeard();
        this.drain();
        return;
      }
      this.reading = false;
      this.readsFailing = false;
      const more = this.apply(page);
      this.settleAhead();
      this.forgetReadPast();
      if (!more) this.reachedHead(ticket);
      this.drain();
      if (!more && !this.again) return;
    }
  }

  /** A nudge, or where an own append went: now, or after the page of the read in flight. */
  private take(item: Held): void {
    if (this.closed) return;
    if (!this.reading) return this.handle(item);
    if (this.held.length >= READ_BATCH) {
      // A flood while a read waits: what they said is in the log; read it once more instead.
      this.held = [];
      this.again = true;
    }
    this.held.push(item);
  }

  private drain(): void {
    const held = this.held;
    this.held = [];
    for (const item of held) this.handle(item);
  }

  private handle(item: Held): void {
    if ('own' in item) return this.ownAppended(item.own);
    const { metrics, macs } = this.options;
    const entry = item.nudge.entry;
    if (!this.synced || this.position === null || this.epoch === null) {
      void this.catchUp();
      return;
    }
    if (item.nudge.bare) {
      // An entry was written that was not announced with itself: read it.
      metrics.nudges.inc({ outcome: 'bare' });
      void this.catchUp();
      return;
    }
    // Nothing a nudge says is believed before its MAC verifies (anyone who can publish can send one),
    // not even where it stands: ids are compared only within this replica's epoch, which the MAC
    // covers. One that does not verify only makes this replica read (the log tells a new epoch).
    if (!entry || !macs.verify(chainSubject({ epoch: this.epoch, id: entry.id, previous: entry.previous }, entry.origin, entry.revocation), entry.chain)) {
      metrics.nudges.inc({ outcome: 'unverified' });
      void this.catchUp();
      return;
    }
    this.place({ entry });
  }

  /** A verified entry, or where an own append went: applied if it is the next, dropped if read past, held if ahead. */
  private place(item: Ahead): void {
    const { log, metrics } = this.options;
    const at = 'own' in item ? item.own : item.entry;
    const step = log.step(this.position!, at);
    if (step === 'stale') {
      if ('entry' in item) metrics.nudges.inc({ outcome: item.entry.origin === this.replicaId ? 'own' : 'stale' });
      return;
    }
    if (step === 'gap') {
      this.ahead.set(at.id, item);
      if ('entry' in item) {
        if (this.announced === null || this.options.log.compareIds(item.entry.id, this.announced) > 0) this.announced = item.entry.id;
        // While the log cannot be read, what the nudge says is all this replica will hear of it.
        if (this.readsFailing) this.applyAhead(item.entry);
      }
      if (this.graceTimer === undefined) {
        this.graceTimer = setTimeout(() => this.graceEnded(), this.options.reorderGraceMs ?? INVALIDATION_REORDER_GRACE_MS);
        this.graceTimer.unref();
      }
      return;
    }
    this.position = step.next;
    if ('entry' in item) {
      this.proof.heard();
      if (item.entry.origin === this.replicaId) metrics.nudges.inc({ outcome: 'own' });
      else if (this.appliedAhead.delete(item.entry.id)) metrics.nudges.inc({ outcome: 'applied' });
      else {
        applyTo(this.options.local, item.entry.revocation);
        metrics.received.inc({ scope: item.entry.revocation.scope });
        metrics.nudges.inc({ outcome: 'applied' });
      }
    }
    this.settleAhead();
  }

  /** What was held ahead and now follows the position (or was read past). */
  private settleAhead(): void {
    for (let moved = true; moved && this.ahead.size > 0; ) {
      moved = false;
      for (const [id, item] of this.ahead) {
        const step = this.options.log.step(this.position!, 'own' in item ? item.own : item.entry);
        if (step === 'gap') continue;
        this.ahead.delete(id);
        if (step === 'stale') continue;
        this.place(item);
        moved = true;
        break;
      }
    }
    if (this.ahead.size === 0) {
      clearTimeout(this.graceTimer);
      this.graceTimer = undefined;
    }
  }

  /** The entry the held ones follow never came: a nudge was lost (or never published). The read must find the newest announced. */
  private graceEnded(): void {
    this.graceTimer = undefined;
    if (this.ahead.size === 0) return;
    for (const item of this.ahead.values()) {
      if (!('entry' in item)) continue;
      this.options.metrics.nudges.inc({ outcome: 'gap' });
      // Verified: a revocation this replica holds. The read applies it in order; if the read fails, it is applied as it is.
      if (!this.appliedAhead.has(item.entry.id)) this.heardAhead.set(item.entry.id, item.entry);
    }
    this.ahead.clear();
    this.proof.missing();
    void this.catchUp();
  }

  /**
   * A read failed: the verified revocations heard ahead of the position (their nudges showed a
   * gap) are applied now, as they are; a purge commutes with any other and repeating one is
   * harmless. Only the position waits for the log.
   */
  private applyHeard(): void {
    for (const entry of this.heardAhead.values()) this.applyAhead(entry);
    this.heardAhead.clear();
    for (const item of this.ahead.values()) if ('entry' in item) this.applyAhead(item.entry);
  }

  private applyAhead(entry: VerifiedEntry): void {
    if (entry.origin === this.replicaId || this.appliedAhead.has(entry.id)) return;
    this.appliedAhead.add(entry.id);
    applyTo(this.options.local, entry.revocation);
    this.options.metrics.received.inc({ scope: entry.revocation.scope });
  }

  /** After a read: what was heard ahead and is now read past was applied from the log (or by its nudge). */
  private forgetReadPast(): void {
    const { log } = this.options;
    const past = (id: string): boolean => this.position !== null && log.step(this.position, { id, previous: id }) === 'stale';
    for (const id of this.heardAhead.keys()) if (past(id)) this.heardAhead.delete(id);
    for (const id of this.appliedAhead) if (past(id) && !this.ahead.has(id)) this.appliedAhead.delete(id);
  }

  /** This replica's own entry, as the append's answer placed it: the next one moves it on unread. */
  private ownAppended(place: AppendedPlace): void {
    if (!this.synced || this.position === null || place.epoch !== this.epoch) {
      void this.catchUp();
      return;
    }
    this.place({ own: place });
  }

  /** A connection broke or moved: what was published meanwhile may be lost. */
  private disturbed(): void {
    this.proof.disturbed();
    void this.catchUp();
  }

  /** A read reached the head: everything written before it was sent is applied; its echo will say whether the subscription carries the rest. */
  private reachedHead(ticket: ProofTicket): void {
    this.caughtUp(ticket.sentAt);
    if (this.ahead.size === 0) this.announced = null;
    this.proof.readReachedHead(ticket);
  }

  /** Everything written before `sentAt` has been applied (or purged for). */
  private caughtUp(sentAt: number): void {
    this.caughtUpAt = Math.max(this.caughtUpAt, sentAt);
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
    // The subscription carried everything up to the last thing it delivered in order (a nudge, an
    // echo: kept fresh by the keep-alive), not up to now: a read that gets no answer may mean its
    // socket died silently, and the subscriber's with it. The silence counts from there, and the
    // reads go on every second until one gets through.
    this.proof.lost(this.proof.lastHeard);
    // The store answered after this read was sent (its refusal, or another command): it serves
    // others, who may have had a revocation acknowledged that this replica cannot read.
    const storeAnswers = log.answeredSince(sentAt);
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
      // Applied already from its nudge, heard ahead while the log could not be read.
      if (this.appliedAhead.delete(entry.id)) continue;
      applyTo(this.options.local, entry.revocation);
      this.options.metrics.received.inc({ scope: entry.revocation.scope });
    }
  }

  private authentic(epoch: string, entry: InvalidationEntry, revocation: Revocation): boolean {
    return this.options.macs.verify(sealSubject({ epoch, id: entry.id }, entry.origin, revocation), entry.mac);
  }

  private restartAt(page: InvalidationPage, cause: CatchUpPurgeCause): boolean {
    this.purgeAll(cause);
    // What was held ahead was placed in the log this replica no longer follows (and the purge covers it).
    this.ahead.clear();
    this.heardAhead.clear();
    this.appliedAhead.clear();
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
