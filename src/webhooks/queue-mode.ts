import type { StepTrace } from '../lib/trace.js';
import type { DeliveryMode, DeliveryResult, VerifiedEvent } from './delivery-mode.js';
import type { EnqueueResult, EventQueue } from './event-queue.js';
import type { SequenceTracker } from './sequence-tracker.js';

export interface QueueModeOptions {
  /** Where accepted events go (the queue worker, which also starts and stops the workers). */
  readonly queue: EventQueue & { start(): Promise<void>; stop(graceMs: number): Promise<void> };
  readonly sequences: SequenceTracker;
}

/**
 * Queue delivery: 200 once the event is in the queue's store (and on the configured number of
 * its replicas); the queue deduplicates in the same atomic step, and its workers forward.
 */
export class QueueMode implements DeliveryMode {
  readonly name = 'queue';

  constructor(private readonly o: QueueModeOptions) {}

  start(): Promise<void> {
    return this.o.queue.start();
  }

  close(graceMs: number): Promise<void> {
    return this.o.queue.stop(graceMs);
  }

  async deliver(e: VerifiedEvent, steps: StepTrace): Promise<DeliveryResult> {
    const { sequences } = this.o;
    const outOfOrder = sequences.isBehind(e.envelope.sequence);
    let result: EnqueueResult;
    try {
      result = await steps.step('enqueue', () => this.o.queue.enqueue({ facts: e.facts(outOfOrder), body: e.rawBody }));
    } catch (err) {
      return { kind: 'failed', reason: 'queue_unavailable', cause: 'queue_unavailable', err };
    }
    if (result === 'duplicate') return { kind: 'duplicate' };
    if (result === 'full') return { kind: 'failed', reason: 'queue_full', cause: 'queue_full' };
    sequences.observe(e.envelope.sequence);
    return { kind: 'accepted', reason: 'queued', outOfOrder };
  }
}
