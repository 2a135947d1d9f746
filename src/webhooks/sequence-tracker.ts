import type { WebhookMetrics } from './metrics.js';

/**
 * Highest envelope `sequence` seen. The document: "Events can arrive out of order" and gaps come
 * from other tenants or unsubscribed types, so only a step backwards is worth telling the app about.
 */
export class SequenceTracker {
  private highest: number | undefined;

  constructor(private readonly metrics: Pick<WebhookMetrics, 'highestSequence' | 'outOfOrder'>) {}

  /** Whether `sequence` is lower than the highest seen, without recording it. */
  isBehind(sequence: number): boolean {
    return this.highest !== undefined && sequence < this.highest;
  }

  /** Records `sequence`; true when it is lower than the highest seen before it. */
  observe(sequence: number): boolean {
    if (this.highest !== undefined && sequence < this.highest) {
      this.metrics.outOfOrder.inc();
      return true;
    }
    this.highest = sequence;
    this.metrics.highestSequence.set(sequence);
    return false;
  }
}
