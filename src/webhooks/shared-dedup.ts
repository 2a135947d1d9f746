import { performance } from 'node:perf_hooks';
import type { Logger } from '../observability/index.js';
import { RateLimiter } from '../observability/rate-limited-log.js';
import { outcomeUnknown, storeRefused } from '../lib/store-failure.js';
import type { ClaimStore } from './claim-store.js';
import { DedupBacklog } from './dedup-backlog.js';
import { logId } from './event-id.js';
import type { ClaimResult, DedupStore, InFlightOutcome } from './dedup-store.js';
import { WebhookError } from './errors.js';
import type { MarkerMacs } from './markers.js';
import type { SharedDedupMetrics } from './metrics.js';

/** Slack after a remote claim's lease before a waiter gives up on it (ms). */
const LEASE_SLACK_MS = 50;
/**
 * Another replica's claim may have up to this many times our own lease left: replicas of one fleet
 * run one `--webhook-dedup-lease-ms`, and a rollout that changes it by up to this factor leaves
 * every old claim honoured by the new replicas and every new one by the old. An in-flight value
 * with more left is no claim of ours (a Redis writer's, which would otherwise hold the event for
 * as long as its TTL): it is taken over, and counted as a marker mismatch. So a writer's forged
 * claim delays an event by at most this many leases.
 */
export const LEASE_SPREAD = 2;
const FALLBACK_LOG_INTERVAL_MS = 30_000;

export interface SharedDedupOptions {
  readonly store: ClaimStore;
  /**
   * This replica's own store, asked first: an event accepted or in flight here never costs a
   * round trip, and it is what remains when the shared store is unreachable.
   */
  readonly local: DedupStore;
  /** Claim lease (ms), `--webhook-dedup-lease-ms`; must exceed the forward timeout. */
  readonly leaseMs: number;
  /**
   * How long a forward may take (ms), `--webhook-forward-timeout-ms`: a claim whose answer came so
   * late that less than this is left of its lease is not used (see {@link SharedDedup.claim}).
   */
  readonly forwardTimeoutMs: number;
  /** How long an accepted id is remembered (ms), `--webhook-dedup-retention-ms`. */
  readonly retentionMs: number;
  readonly metrics: SharedDedupMetrics;
  /** MACs of the accepted markers (keyed from the webhook secrets): a marker that fails is no duplicate. */
  readonly macs: MarkerMacs;
  readonly logger: Logger;
  /** Epoch ms. */
  readonly now: () => number;
}

interface Held {
  readonly token: string;
  /** `shared`: the claim is in the store; `local`: the store was unreachable, this replica decided alone. */
  readonly mode: 'shared' | 'local';
}

/**
 * {@link DedupStore} shared by every replica (contract, Several replicas). The policy:
 *
 * - this replica's store first (no round trip for a copy it holds or accepted), then the shared claim;
 * - a copy in flight on another replica waits for its settlement (announced), at most until the
 *   holder's lease ends (a holder that died never announces);
 * - **slow is not down**: a claim whose answer did not come may be in the store, and another
 *   replica's may be too, so the event is not forwarded on a guess: `claim` rejects with
 *   `ERR_WEBHOOK_DEDUP_UNKNOWN` (the ingress answers 503, the service retries) and our possible claim
 *   is released once the store answers. The same while the store is away for less than a lease (a
 *   restart, a failover, a reconnect): a copy on another replica could be claimed there meanwhile.
 *   An outage or stall shorter than the lease forwards no event twice;
 * - **down is down**: when the store answers with an error (misconfigured: it will not do it), or
 *   has been silent longer than a lease (past which anything it holds of ours has lapsed), this
 *   replica decides alone, counted; ids accepted meanwhile are written once it answers. An answer
 *   that is not an answer (a replica turned read-only, a node loading, a slot moving: a failover)
 *   is silence, not a refusal: another replica may be claiming on the new master meanwhile;
 * - an accept the store did not record for sure (slow, a failover, too few replicas) is no 200.
 */
export class SharedDedup implements DedupStore {
  private readonly held = new Map<string, Held>();
  private readonly waiters = new Map<string, Set<(outcome: InFlightOutcome) => void>>();
  private readonly fallbackLog = new RateLimiter(FALLBACK_LOG_INTERVAL_MS);
  private readonly mismatchLog = new RateLimiter(FALLBACK_LOG_INTERVAL_MS);
  private readonly backlog: DedupBacklog;
  private closed = false;

  constructor(private readonly options: SharedDedupOptions) {
    if (!(options.leaseMs > 0) || !(options.retentionMs > 0)) throw new RangeError('SharedDedup: leaseMs and retentionMs must be > 0');
    if (!(options.forwardTimeoutMs > 0) || options.forwardTimeoutMs >= options.leaseMs) throw new RangeError('SharedDedup: forwardTimeoutMs must be > 0 and below leaseMs');
    this.backlog = new DedupBacklog({ store: options.store, marker: (id) => options.macs.sign('accepted', id), logger: options.logger, now: options.now });
  }

  /** Listens for settlements; call once before use. */
  async start(): Promise<void> {
    this.options.store.onRestored(() => void this.backlog.flush());
    await this.options.store.onSettled((id, outcome, marker) => this.onSettled(id, outcome, marker));
  }

  async claim(id: string): Promise<ClaimResult> {
    const { local, store, leaseMs } = this.options;
    const mine = await local.claim(id);
    if (mine.kind !== 'claimed') return mine;
    const { token } = mine;

    // Listen before asking: the holder may settle before our reply is read.
    const wait = this.waitFor(id);
    // Redis starts the lease when it runs the script, which may be long before its answer is read
    // here (a stall, a throttled CPU): the lease is counted from the asking.
    const askedAt = performance.now();
    let shared;
    try {
      shared = await store.claim(id, token, leaseMs, this.options.macs.accepted('accepted', id), leaseMs * LEASE_SPREAD);
    } catch (err) {
      wait.cancel();
      // Down is down: refused by a Redis that answers (misconfigured), or silent longer than a lease.
      if (storeRefused(err) || store.silentForMs() >= leaseMs) {
        this.fallback('claim', err);
        // Per event, at debug: which events this replica decided alone (the counter says how many).
        this.options.logger.debug({ event: 'webhook_dedup_decided_alone', eventId: logId(id) }, 'webhook dedup decided by this replica alone');
        this.held.set(id, { token, mode: 'local' });
        return { kind: 'claimed', token };
      }
      // Slow, or away for less than a lease (a restart, a failover, a reconnect): another replica may
      // hold the event in Redis, or get it from the service's retry while we decide alone.
      this.options.metrics.unknownOutcomes.inc({ op: 'claim' });
      await local.release(id, token);
      if (outcomeUnknown(err)) this.backlog.unknownClaim(id, token);
      throw new WebhookError('ERR_WEBHOOK_DEDUP_UNKNOWN', 'the shared dedup store did not answer; not forwarded on a guess', { cause: err });
    }

    if (shared.kind === 'claimed') {
      wait.cancel();
      // Something else held the key: not a marker of ours (forged, or written without our secrets,
      // or a claim with more left than any replica's lease).
      if (shared.displaced) this.mismatch('accepted', id);
      this.held.set(id, { token, mode: 'shared' });
      // A claim read too late to cover a whole forward could lapse under it, and another replica
      // claim the service's retry and forward it too: a slow answer is no answer. Let it go (the
      // retry goes through sooner) and answer 503.
      const late = performance.now() - askedAt;
      if (late > leaseMs - this.options.forwardTimeoutMs) {
        this.options.metrics.unknownOutcomes.inc({ op: 'claim' });
        await this.release(id, token);
        throw new WebhookError('ERR_WEBHOOK_DEDUP_UNKNOWN', `the shared dedup claim was answered after ${Math.round(late)} ms, too late to leave its lease a whole forward; not forwarded`);
      }
      return { kind: 'claimed', token };
    }
    if (shared.kind === 'duplicate') {
      wait.cancel();
      // Remember it here too, so the next copy costs no round trip.
      await local.markAccepted(id, token);
      return { kind: 'duplicate' };
    }
    const untilLeaseEnds = (shared.remainingMs > 0 ? Math.min(shared.remainingMs, leaseMs) : leaseMs) + LEASE_SLACK_MS;
    const outcome = wait.until(untilLeaseEnds).then(async (o) => {
      // Local copies queued behind ours learn the same outcome.
      if (o === 'accepted') await local.markAccepted(id, token);
      else await local.release(id, token);
      return o;
    });
    return { kind: 'in_flight', outcome };
  }

  /**
   * Records the accept in the store (and, when it replicates, on its replicas). The app has the
   * event: that stands, here and, once the store answers, everywhere. When the store is down the
   * accept is this replica's alone (counted, written later). When it is not known to be recorded
   * (no answer in time, a failover under way, fewer replicas than asked acknowledged it) it
   * rejects with `ERR_WEBHOOK_DEDUP_UNKNOWN`: no 200 for an accept a failover could forget.
   */
  async markAccepted(id: string, token: string): Promise<void> {
    const held = this.take(id, token);
    const { store, leaseMs } = this.options;
    try {
      const { macs } = this.options;
      const r = await store.accept(id, token, this.options.retentionMs, macs.sign('accepted', id), macs.accepted('accepted', id));
      if (r === 'lapsed' && held?.mode === 'shared') {
        this.options.metrics.leaseLapses.inc();
        this.options.logger.warn({ event: 'webhook_dedup_lease_lapsed', eventId: logId(id) }, 'the claim lapsed before the app answered; raise --webhook-dedup-lease-ms');
      }
    } catch (err) {
      // The other replicas learn it once the store answers (written again then, whatever happened).
      this.backlog.accepted(id, this.options.now() + this.options.retentionMs);
      if (storeRefused(err) || store.silentForMs() >= leaseMs) {
        this.fallback('accept', err);
        return;
      }
      this.options.metrics.unknownOutcomes.inc({ op: 'accept' });
      throw new WebhookError('ERR_WEBHOOK_DEDUP_UNKNOWN', 'the shared dedup store did not record the accept (no answer, a failover, or too few replicas); answered 503', { cause: err });
    } finally {
      await this.options.local.markAccepted(id, token);
    }
  }

  async release(id: string, token: string): Promise<void> {
    const held = this.take(id, token);
    try {
      if (held?.mode === 'shared') await this.options.store.release(id, token);
    } catch (err) {
      // The lease frees the key anyway; releasing sooner lets the service's retry through sooner.
      this.fallback('release', err);
      if (outcomeUnknown(err)) this.backlog.unknownClaim(id, token);
    } finally {
      await this.options.local.release(id, token);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.backlog.close();
    for (const set of this.waiters.values()) for (const wake of set) wake('released');
    this.waiters.clear();
    this.held.clear();
    await this.options.local.close();
  }

  private take(id: string, token: string): Held | undefined {
    const held = this.held.get(id);
    if (held?.token !== token) return undefined;
    this.held.delete(id);
    return held;
  }

  private waitFor(id: string): { cancel(): void; until(ms: number): Promise<InFlightOutcome> } {
    let wake!: (o: InFlightOutcome) => void;
    const settled = new Promise<InFlightOutcome>((resolve) => (wake = resolve));
    let set = this.waiters.get(id);
    if (!set) this.waiters.set(id, (set = new Set()));
    set.add(wake);
    const cancel = (): void => {
      set.delete(wake);
      if (set.size === 0 && this.waiters.get(id) === set) this.waiters.delete(id);
    };
    return {
      cancel,
      until: (ms) => {
        if (this.closed) {
          cancel();
          return Promise.resolve('released');
        }
        const timer = setTimeout(() => {
          cancel();
          wake('released');
        }, ms);
        timer.unref();
        return settled.finally(() => {
          clearTimeout(timer);
          cancel();
        });
      },
    };
  }

  private onSettled(id: string, outcome: InFlightOutcome, marker: string | null): void {
    const set = this.waiters.get(id);
    if (!set) return;
    // "Accepted" answers a waiting copy 200 without a forward: only with the marker's MAC. Without
    // it the copy waits on, and is answered 503 at the holder's lease end (the service retries).
    if (outcome === 'accepted' && !this.options.macs.verify('accepted', id, marker)) {
      this.mismatch('announced', id);
      return;
    }
    this.waiters.delete(id);
    for (const wake of set) wake(outcome);
  }

  /** A marker (or an announcement) that did not carry our MAC: no duplicate, counted, logged rate-limited. */
  private mismatch(marker: 'accepted' | 'announced', id: string): void {
    this.options.metrics.markerMismatches.inc({ marker });
    const suppressed = this.mismatchLog.admit(marker);
    if (suppressed !== undefined) {
      this.options.logger.warn({ event: 'webhook_marker_mismatch', marker, eventId: logId(id), suppressed }, 'a dedup marker in Redis without a valid MAC was not taken as a duplicate (written by something without the webhook secrets)');
    }
  }

  private fallback(op: 'claim' | 'accept' | 'release', err: unknown): void {
    this.options.metrics.fallbacks.inc({ op });
    const code = (err as { code?: unknown })?.code;
    const label = typeof code === 'string' ? code : 'ERR_UNKNOWN';
    const suppressed = this.fallbackLog.admit(`${op}:${label}`);
    if (suppressed !== undefined) {
      this.options.logger.warn({ event: 'webhook_dedup_fallback', op, code: label, suppressed }, 'Redis unreachable; webhook dedup decided by this replica alone');
    }
  }
}
