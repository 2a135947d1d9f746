import { createHash } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Counter } from 'prom-client';
import type { Logger } from '../observability/index.js';
import { RateLimiter } from '../observability/rate-limited-log.js';
import { logId } from './event-id.js';
import type { MarkerMacs } from './markers.js';
import type { QueueStore } from './queue-store.js';
import { LEASE_SPREAD } from './shared-dedup.js';

const LOG_INTERVAL_MS = 30_000;

/**
 * What the claim before a forward came to: the forward may start (`claimed`, under `token`); the
 * event was delivered before; another entry of it is being forwarded (`busy`, for `remainingMs`
 * more at most); the claim's outcome is unknown (no answer, or an error reply), or it was answered
 * too late to leave a whole forward inside its lease (`too_late`): not forwarded.
 */
export type ForwardClaimStep =
  | { readonly kind: 'claimed'; readonly token: string }
  | { readonly kind: 'delivered' }
  | { readonly kind: 'busy'; readonly remainingMs: number }
  | { readonly kind: 'unknown'; readonly err: unknown }
  | { readonly kind: 'too_late' };

export interface ForwardClaimsOptions {
  readonly store: QueueStore;
  readonly macs: MarkerMacs;
  /** The consumer the worker reads as: with the entry id, it makes the claim's token. */
  readonly consumer: string;
  /** The claim's lease (ms): the queue's visibility, `--webhook-dedup-lease-ms`. */
  readonly leaseMs: number;
  /** `--webhook-forward-timeout-ms`: a claim must leave at least this much of its lease when its answer is read. */
  readonly forwardTimeoutMs: number;
  /** `marker="claim"`: a value that was no replica's claim, taken over. */
  readonly mismatches: Counter<'marker'>;
  readonly logger: Logger;
}

/**
 * The per-event claim before each forward in queue mode. Entries are handled side by side, and a
 * writer may add any number of copies of a waiting event: the delivered marker, checked when a
 * batch is read, cannot keep two entries of one event from being forwarded together. The claim
 * does, in one step with the check of the delivered marker:
 *
 * - one entry of an event at a time is forwarded: another finds the claim (`busy`) and waits;
 * - the lease is the visibility, so a replica that dies holding a claim holds it no longer than it
 *   holds the entry; a claim with more left than {@link LEASE_SPREAD} leases, or none, is a
 *   writer's, taken over and counted (`marker="claim"`);
 * - a claim whose answer did not come, or came too late to leave a whole forward inside its
 *   lease, is no claim: nothing is forwarded on it, and the entry is read again (it stays pending
 *   with this consumer). The token is the consumer's and the entry's, so that entry claims again
 *   (the lease renewed) whatever the lost answer did, while any other entry of the event waits.
 */
export class ForwardClaims {
  private readonly log = new RateLimiter(LOG_INTERVAL_MS);

  constructor(private readonly o: ForwardClaimsOptions) {}

  /** Claims `eventId` for the forward of entry `entryId`. */
  async claim(entryId: string, eventId: string): Promise<ForwardClaimStep> {
    const { store, leaseMs } = this.o;
    const token = this.token(entryId);
    // Redis starts the lease when it runs the script, maybe long before its answer is read here.
    const askedAt = performance.now();
    let r;
    try {
      r = await store.claimForward(eventId, token, leaseMs, leaseMs * LEASE_SPREAD, this.o.macs.accepted('delivered', eventId));
    } catch (err) {
      return { kind: 'unknown', err };
    }
    if (r.kind !== 'claimed') return r;
    if (r.displaced) {
      this.o.mismatches.inc({ marker: 'claim' });
      const suppressed = this.log.admit('claim');
      if (suppressed !== undefined) {
        this.o.logger.warn({ event: 'webhook_marker_mismatch', marker: 'claim', eventId: logId(eventId), suppressed }, 'a queue forward claim in Redis that was no replica\'s was taken over (written by something without the webhook secrets)');
      }
    }
    if (performance.now() - askedAt > leaseMs - this.o.forwardTimeoutMs) return { kind: 'too_late' };
    return { kind: 'claimed', token };
  }

  /** Lets the claim go (best effort: its lease frees it anyway; sooner lets the next attempt through sooner). */
  async release(eventId: string, token: string): Promise<void> {
    try {
      await this.o.store.releaseForward(eventId, token);
    } catch {
      // The lease ends it.
    }
  }

  /** The same for every read of one entry by this consumer, and for no other entry or consumer. */
  private token(entryId: string): string {
    return createHash('sha256').update(this.o.consumer).update('\0').update(entryId).digest('base64url').slice(0, 22);
  }
}
