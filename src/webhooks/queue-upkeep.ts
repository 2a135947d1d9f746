import type { QueueMetrics } from './metrics.js';
import type { QueueStore } from './queue-store.js';
import { ROUTES_ADVERTISE_INTERVAL_MS, type RouterDirectory } from './queue-routers.js';

/** How often the gauges are read (ms). */
const STATS_INTERVAL_MS = 1000;
/** How often a worker looks for consumers of dead processes to remove (ms). */
const CONSUMER_SWEEP_INTERVAL_MS = 60_000;
/** Due events moved back to the queue per step. */
const PROMOTE_BATCH = 200;

/** Runs one step of a worker's round, counting and logging its failure (never throws). */
export type Step = (where: string, work: () => Promise<unknown>) => Promise<void>;

/**
 * What a queue worker does beside forwarding, each at its own pace within the worker's rounds:
 * filing its route table for the other replicas, moving parked events whose retry is due back to
 * the queue, reading the gauges (depth, oldest age, dead letters: all replicas'), and removing
 * consumers of dead processes.
 */
export class QueueUpkeep {
  private lastAdvert = -Infinity;
  private lastPromote = 0;
  private lastStats = 0;
  private lastSweep = 0;

  constructor(
    private readonly o: {
      readonly store: QueueStore;
      /** Where this worker's route table is filed. */
      readonly routers: Pick<RouterDirectory, 'advertise'>;
      readonly metrics: Pick<QueueMetrics, 'depth' | 'oldestAge' | 'deadLetters'>;
      /** This process's consumer (never swept). */
      readonly consumer: string;
      readonly pollIntervalMs: number;
      readonly staleConsumerMs: number;
    },
  ) {}

  /** Before the reads: the other replicas know what this one's routes take (the first round files it at once). */
  async advertise(now: number, step: Step): Promise<void> {
    if (now - this.lastAdvert < ROUTES_ADVERTISE_INTERVAL_MS) return;
    this.lastAdvert = now;
    await step('advertise', () => this.o.routers.advertise());
  }

  /** Before the reads: what became due is on the queue for them. */
  async promote(now: number, step: Step): Promise<void> {
    if (now - this.lastPromote < this.o.pollIntervalMs) return;
    this.lastPromote = now;
    await step('promote', () => this.o.store.promoteDue(now, PROMOTE_BATCH));
  }

  /** After the reads: the gauges, and the sweep. */
  async report(now: number, step: Step): Promise<void> {
    if (now - this.lastStats >= STATS_INTERVAL_MS) {
      this.lastStats = now;
      await step('stats', () => this.readStats(now));
    }
    if (now - this.lastSweep >= CONSUMER_SWEEP_INTERVAL_MS) {
      this.lastSweep = now;
      await step('sweep', () => this.o.store.sweepConsumers(this.o.consumer, this.o.staleConsumerMs));
    }
  }

  private async readStats(now: number): Promise<void> {
    const { depth, oldestAcceptedAt, deadLetters } = await this.o.store.stats();
    const { metrics } = this.o;
    metrics.depth.set(depth);
    metrics.oldestAge.set(oldestAcceptedAt === null ? 0 : Math.max(0, (now - oldestAcceptedAt) / 1000));
    metrics.deadLetters.set(deadLetters);
  }
}
