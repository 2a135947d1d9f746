import type { Logger } from '../observability/index.js';
import type { Tracing } from '../observability/tracing.js';
import type { AppClient } from './app-client.js';
import type { AppRoutes } from './app-routes.js';
import type { QueueMetrics } from './metrics.js';
import type { QueueStore } from './queue-store.js';

// What a queue worker is built with, and its defaults (the worker itself is queue-worker.ts).

/** Forwards in flight per replica. */
export const QUEUE_CONCURRENCY = 32;
/** Workers look for due, new and abandoned events at least this often (ms); a wake message makes it sooner. */
export const QUEUE_POLL_INTERVAL_MS = 250;
/** A consumer with nothing pending and idle this long is removed (ms); a live one is recreated by its next read. */
export const QUEUE_STALE_CONSUMER_MS = 3_600_000;
/** Bytes one read brings into the process at most (about: one entry may take it past), unless one entry is larger. */
export const QUEUE_READ_BATCH_BYTES = 8 * 1024 * 1024;

export interface QueueWorkerOptions {
  readonly store: QueueStore;
  readonly logger: Logger;
  readonly metrics: QueueMetrics;
  /** The current webhook secrets (`--webhook-secret[-file]`, rotation followed): every entry is verified again with them. */
  readonly secrets: () => readonly string[];
  /** The wing's one app client, and the routes by event type (`--app-webhook-route`, `--app-webhook-url`). */
  readonly app: AppClient;
  readonly routes: AppRoutes;
  /** Forwards by route and outcome (shared with passthrough). */
  readonly routeForwards: { labels(route: string, outcome: string): { inc(): void } };
  /** `--webhook-forward-timeout-ms`. */
  readonly forwardTimeoutMs: number;
  /**
   * How long an event taken by a worker stays its own before another replica may take it (ms),
   * `--webhook-dedup-lease-ms`. Must exceed the forward timeout: a slow app must never get two copies at once.
   */
  readonly visibilityMs: number;
  /** `--webhook-queue-horizon-ms`: retried this long after acceptance, then dead-lettered. */
  readonly horizonMs: number;
  /**
   * `--webhook-tolerance-s`: a stored delivery signed longer ago than the horizon plus this is
   * expired, never forwarded; the delivered marker lives at least the horizon plus twice this.
   */
  readonly toleranceS: number;
  /** `--webhook-max-body-bytes`: an entry larger than such a body stored is never read into the process. */
  readonly maxBodyBytes: number;
  /** How long an accepted id is remembered and the delivered marker lives at least (ms), `--webhook-dedup-retention-ms`. */
  readonly deliveredRetentionMs: number;
  /** Deliveries remembered in this process at most, `--webhook-dedup-max-entries`. */
  readonly deliveredMaxEntries?: number;
  /** Epoch ms. */
  readonly now: () => number;
  readonly concurrency?: number;
  readonly pollIntervalMs?: number;
  /** Default {@link QUEUE_STALE_CONSUMER_MS}. */
  readonly staleConsumerMs?: number;
  /** Each entry handled as a span of its own (spans on); off by default. */
  readonly tracing?: Pick<Tracing, 'run'>;
}
