import type { Logger } from '../observability/index.js';
import { RateLimiter } from '../observability/rate-limited-log.js';
import type { ClaimResult, DedupStore, InFlightOutcome } from '../webhooks/index.js';
import type { RedisConnection } from './connection.js';
import { ACCEPT, CLAIM, RELEASE } from './dedup-scripts.js';
import { RedisError } from './errors.js';
import type { RedisKeyspace } from './keyspace.js';
import type { RedisMetrics } from './metrics.js';

/** Channel (under the prefix) on which settled claims are announced: `{"id":…,"outcome":"accepted"|"released"}`. */
export const DEDUP_SETTLED_CHANNEL = 'dedup-settled';
/** Owner segment of the dedup keys: `<prefix>dedup:<event id>`. */
export const DEDUP_KEY_OWNER = 'dedup';
/** Slack after a remote claim's lease before a waiter gives up on it (ms). */
const LEASE_SLACK_MS = 50;
const FALLBACK_LOG_INTERVAL_MS = 30_000;
/** Ids accepted while Redis was away, kept to be written once it is back (oldest dropped beyond). */
const MAX_UNSHARED = 100_000;
/**
 * How soon ids accepted without Redis are written again (ms). A restore writes them too, but one
 * failed call while the health check keeps passing is no restore: without this retry those ids
 * would stay known to this replica only.
 */
const UNSHARED_RETRY_MS = 1000;

export interface RedisDedupStoreOptions {
  readonly connection: RedisConnection;
  readonly keyspace: RedisKeyspace;
  /**
   * This replica's own store, asked first: an event accepted or in flight here never costs a
   * round trip, and it is what remains when Redis does not answer.
   */
  readonly local: DedupStore;
  /** Claim lease (ms), `--webhook-dedup-lease-ms`; must exceed the forward timeout. */
  readonly leaseMs: number;
  /** How long an accepted id is remembered (ms), `--webhook-dedup-retention-ms`. */
  readonly retentionMs: number;
  readonly metrics: RedisMetrics;
  readonly logger: Logger;
}

interface Held {
  readonly token: string;
  /** `redis`: the claim is in Redis; `local`: Redis did not answer, this replica decided alone. */
  readonly mode: 'redis' | 'local';
}

/**
 * {@link DedupStore} shared by every replica through Redis (contract, "Several replicas").
 *
 * - claim: the local store first, then a script that sets `dedup:<id>` to `inflight:<token>` with
 *   the lease as TTL when the key is absent, or tells `accepted` / in flight (with its remaining TTL);
 * - accept: records `accepted` with the retention TTL and announces it; release deletes the key only
 *   while it still holds our token, and announces it;
 * - a copy in flight on another replica waits for that announcement on the `dedup-settled` channel
 *   (no polling), and at most until the holder's lease ends (a holder that died never announces);
 * - Redis unreachable or slow: the step is decided by the local store alone and counted in
 *   `consent_sidecar_webhook_dedup_fallbacks_total`; a webhook is never refused for it. Ids accepted
 *   meanwhile are written to Redis when it is back.
 */
export class RedisDedupStore implements DedupStore {
  private readonly held = new Map<string, Held>();
  private readonly waiters = new Map<string, Set<(outcome: InFlightOutcome) => void>>();
  private readonly channel: string;
  private readonly fallbackLog = new RateLimiter(FALLBACK_LOG_INTERVAL_MS);
  /** Accepted while Redis did not answer: id → end of retention (epoch ms), written when Redis is back. */
  private readonly unshared = new Map<string, number>();
  private flushing = false;
  private retryTimer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(private readonly options: RedisDedupStoreOptions) {
    if (!(options.leaseMs > 0) || !(options.retentionMs > 0)) throw new RangeError('RedisDedupStore: leaseMs and retentionMs must be > 0');
    this.channel = options.keyspace.channel(DEDUP_SETTLED_CHANNEL);
  }

  /** Subscribes to the settlement channel; call once before use. */
  async start(): Promise<void> {
    this.options.connection.onRestored(() => void this.flushUnshared());
    await this.options.connection.subscribe(this.channel, (message) => this.onSettled(message));
  }

  async claim(id: string): Promise<ClaimResult> {
    const local = await this.options.local.claim(id);
    if (local.kind !== 'claimed') return local;
    const { token } = local;

    // Listen before asking: the holder may settle before our reply is read.
    const wait = this.waitFor(id);
    let reply: [string, number];
    try {
      reply = parseClaim(
        await this.options.connection.call('dedup_claim', (c) =>
          CLAIM.run(c, [this.key(id)], [token, String(this.options.leaseMs)]),
        ),
      );
    } catch (err) {
      wait.cancel();
      this.fallback('claim', err);
      this.held.set(id, { token, mode: 'local' });
      return { kind: 'claimed', token };
    }

    const [kind, pttl] = reply;
    if (kind === 'claimed') {
      wait.cancel();
      this.held.set(id, { token, mode: 'redis' });
      return { kind: 'claimed', token };
    }
    if (kind === 'duplicate') {
      wait.cancel();
      // Remember it here too, so the next copy costs no round trip.
      await this.options.local.markAccepted(id, token);
      return { kind: 'duplicate' };
    }
    const untilLeaseEnds = (pttl > 0 ? Math.min(pttl, this.options.leaseMs) : this.options.leaseMs) + LEASE_SLACK_MS;
    const outcome = wait.until(untilLeaseEnds).then(async (o) => {
      // Local copies queued behind ours learn the same outcome.
      if (o === 'accepted') await this.options.local.markAccepted(id, token);
      else await this.options.local.release(id, token);
      return o;
    });
    return { kind: 'in_flight', outcome };
  }

  async markAccepted(id: string, token: string): Promise<void> {
    const held = this.take(id, token);
    try {
      const message = JSON.stringify({ id, outcome: 'accepted' });
      const r = await this.options.connection.call('dedup_accept', (c) =>
        ACCEPT.run(c, [this.key(id)], [token, String(this.options.retentionMs), this.channel, message]),
      );
      if (r === 0 && held?.mode === 'redis') {
        this.options.metrics.dedupLeaseLapses.inc();
        this.options.logger.warn({ event: 'webhook_dedup_lease_lapsed', eventId: id }, 'the claim lapsed before the app answered; raise --webhook-dedup-lease-ms');
      }
    } catch (err) {
      // The app accepted it: that stands. The other replicas learn it once Redis is back.
      this.fallback('accept', err);
      this.unshared.delete(id);
      this.unshared.set(id, Date.now() + this.options.retentionMs);
      if (this.unshared.size > MAX_UNSHARED) this.unshared.delete(this.unshared.keys().next().value!);
      this.retryFlushSoon();
    } finally {
      await this.options.local.markAccepted(id, token);
    }
  }

  async release(id: string, token: string): Promise<void> {
    const held = this.take(id, token);
    try {
      if (held?.mode === 'redis') {
        const message = JSON.stringify({ id, outcome: 'released' });
        await this.options.connection.call('dedup_release', (c) => RELEASE.run(c, [this.key(id)], [token, this.channel, message]));
      }
    } catch (err) {
      // The lease frees the key anyway.
      this.fallback('release', err);
    } finally {
      await this.options.local.release(id, token);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    for (const set of this.waiters.values()) for (const wake of set) wake('released');
    this.waiters.clear();
    this.held.clear();
    await this.options.local.close();
  }

  /** Writes what was accepted during an outage, so a retry on another replica is a duplicate too. */
  private async flushUnshared(): Promise<void> {
    if (this.flushing || this.closed) return;
    this.flushing = true;
    let written = 0;
    try {
      for (const [id, until] of [...this.unshared]) {
        const remainingMs = until - Date.now();
        if (remainingMs > 0) {
          await this.options.connection.call('dedup_backfill', (c) => c.sendCommand(['SET', this.key(id), 'accepted', 'PX', String(remainingMs)]));
          written++;
        }
        this.unshared.delete(id);
      }
    } catch {
      // Redis went away again: the rest waits for the next restore.
    } finally {
      this.flushing = false;
      if (written > 0) this.options.logger.info({ event: 'webhook_dedup_backfilled', events: written }, 'events accepted during the Redis outage recorded in Redis');
      if (this.unshared.size > 0) this.retryFlushSoon();
    }
  }

  private retryFlushSoon(): void {
    if (this.retryTimer || this.closed) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      void this.flushUnshared();
    }, UNSHARED_RETRY_MS);
    this.retryTimer.unref();
  }

  private key(id: string): string {
    return this.options.keyspace.key(DEDUP_KEY_OWNER, id);
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

  private onSettled(message: string): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(message);
    } catch {
      return;
    }
    const { id, outcome } = (parsed ?? {}) as { id?: unknown; outcome?: unknown };
    if (typeof id !== 'string' || (outcome !== 'accepted' && outcome !== 'released')) return;
    const set = this.waiters.get(id);
    if (!set) return;
    this.waiters.delete(id);
    for (const wake of set) wake(outcome);
  }

  private fallback(op: 'claim' | 'accept' | 'release', err: unknown): void {
    this.options.metrics.dedupFallbacks.inc({ op });
    const code = err instanceof RedisError ? err.code : 'ERR_UNKNOWN';
    const suppressed = this.fallbackLog.admit(`${op}:${code}`);
    if (suppressed !== undefined) {
      this.options.logger.warn({ event: 'webhook_dedup_fallback', op, code, suppressed }, 'Redis did not answer; webhook dedup decided by this replica alone');
    }
  }
}

function parseClaim(reply: unknown): [string, number] {
  if (Array.isArray(reply) && typeof reply[0] === 'string' && typeof reply[1] === 'number') return [reply[0], reply[1]];
  throw new RedisError('ERR_REDIS_REPLY', 'unexpected reply from the dedup claim script');
}
