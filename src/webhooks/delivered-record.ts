import type { Counter } from 'prom-client';
import type { Logger } from '../observability/index.js';
import { RateLimiter } from '../observability/rate-limited-log.js';
import { AcceptedIds } from './accepted-ids.js';
import { logId } from './event-id.js';
import type { MarkerMacs } from './markers.js';
import type { QueueStore } from './queue-store.js';

const MISMATCH_LOG_INTERVAL_MS = 30_000;

export interface DeliveredRecordOptions {
  readonly store: QueueStore;
  readonly macs: MarkerMacs;
  /** How long a delivery is remembered, here and in the store's marker (ms): at least the horizon plus twice the tolerance. */
  readonly ttlMs: number;
  /** Ids remembered in this process at most (oldest forgotten first). */
  readonly maxEntries: number;
  readonly mismatches: Counter<'marker'>;
  readonly logger: Logger;
  /** Epoch ms. */
  readonly now: () => number;
}

/**
 * What queue mode knows of events the app already accepted, so an entry that comes back (a
 * failover that replayed an older state, a crash after the 2xx, a copy added again by whoever can
 * write to Redis) is dropped, never forwarded:
 *
 * - the delivered marker in the store, which carries a MAC keyed from the webhook secrets: a marker
 *   that fails it is no marker (counted), so nobody without the secrets can mark an event delivered
 *   to silence it;
 * - this process's memory of every delivery announced by any replica (announcements carry the
 *   same MAC), for as long as the marker lives: a writer who deletes a marker to have the entry
 *   forwarded again meets a replica that remembers it. A replica that restarts remembers only what
 *   it hears from then on.
 */
export class DeliveredRecord {
  private readonly memory: AcceptedIds;
  private readonly mismatchLog = new RateLimiter(MISMATCH_LOG_INTERVAL_MS);

  constructor(private readonly o: DeliveredRecordOptions) {
    if (!(o.ttlMs > 0)) throw new RangeError('DeliveredRecord: ttlMs must be > 0');
    this.memory = new AcceptedIds(o.maxEntries);
  }

  /** Listens for the other replicas' deliveries. */
  async start(): Promise<void> {
    await this.o.store.onDelivered((id, mac) => {
      if (this.o.macs.verify('delivered', id, mac)) this.remember(id);
      else this.mismatch('announced', id);
    });
  }

  /** The MAC of the delivered marker of `id` (written with the first secret). */
  mac(id: string): string {
    return this.o.macs.sign('delivered', id);
  }

  /** `id` was delivered (by this replica, or announced by another). */
  remember(id: string): void {
    const now = this.o.now();
    this.memory.add(id, now + this.o.ttlMs, now);
  }

  /** Whether this process remembers `id` delivered (no round trip). */
  remembers(id: string): boolean {
    return this.memory.has(id, this.o.now());
  }

  /** For each id: delivered before, by this process's memory or a marker whose MAC verifies. */
  async before(ids: readonly string[]): Promise<boolean[]> {
    const now = this.o.now();
    const known = ids.map((id) => this.memory.has(id, now));
    const ask = ids.filter((_id, i) => !known[i]);
    if (ask.length === 0) return known;
    const marks = await this.o.store.deliveredMarks(ask);
    const verdict = new Map<string, boolean>();
    ask.forEach((id, i) => {
      const mark = marks[i] ?? null;
      const ok = mark !== null && this.o.macs.verify('delivered', id, mark);
      if (mark !== null && !ok) this.mismatch('delivered', id);
      verdict.set(id, ok);
    });
    return ids.map((id, i) => known[i]! || verdict.get(id) === true);
  }

  private mismatch(marker: 'delivered' | 'announced', id: string): void {
    this.o.mismatches.inc({ marker });
    const suppressed = this.mismatchLog.admit(marker);
    if (suppressed !== undefined) {
      this.o.logger.warn(
        { event: 'webhook_marker_mismatch', marker, eventId: logId(id), suppressed },
        'a delivered marker in Redis without a valid MAC was not taken as a delivery (written by something without the webhook secrets)',
      );
    }
  }
}
