import type { EnqueueResult, EventQueue, QueuedEvent } from './event-queue.js';
import type { MarkerMacs } from './markers.js';
import type { QueueMetrics } from './metrics.js';
import type { QueueStore } from './queue-store.js';
import { storeDelivery } from './stored-delivery.js';

/**
 * The ingress side of queue mode: one verified delivery stored as received, deduplicated in the same
 * step against accepted markers whose MAC (keyed from the webhook secrets) is one of ours; a dedup
 * value that is not is no marker: the event is stored over it, and that is counted.
 */
export class QueueIngress implements EventQueue {
  constructor(
    private readonly o: {
      readonly store: QueueStore;
      readonly macs: MarkerMacs;
      readonly metrics: Pick<QueueMetrics, 'full' | 'markerMismatches'>;
      /** How long the accepted marker lives (ms), `--webhook-dedup-retention-ms`. */
      readonly retentionMs: number;
      /** Epoch ms. */
      readonly now: () => number;
    },
  ) {}

  async enqueue(event: QueuedEvent): Promise<EnqueueResult> {
    const { store, macs, metrics } = this.o;
    const id = event.facts.eventId;
    const acceptedAt = this.o.now();
    const stored = storeDelivery(event.facts, event.body, acceptedAt);
    const r = await store.enqueue(id, JSON.stringify(stored), acceptedAt, this.o.retentionMs, { mac: macs.sign('accepted', id), accepted: macs.accepted('accepted', id) });
    if (r.displaced) metrics.markerMismatches.inc({ marker: 'accepted' });
    if (r.outcome === 'full') metrics.full.inc();
    return r.outcome;
  }
}
