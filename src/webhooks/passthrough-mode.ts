import { performance } from 'node:perf_hooks';
import type { StepTrace } from '../lib/trace.js';
import { hasCode } from '../lib/errors.js';
import type { AppClient } from './app-client.js';
import type { DedupStore } from './dedup-store.js';
import type { DeliveryMode, DeliveryResult, VerifiedEvent } from './delivery-mode.js';
import type { WebhookMetrics } from './metrics.js';
import type { SequenceTracker } from './sequence-tracker.js';
import { appHeaders } from './stored-delivery.js';

export interface PassthroughModeOptions {
  /** This replica's memory, or the store shared by every replica. */
  readonly dedup: DedupStore;
  /** Starts the dedup's background work (a shared store's listeners), when it has any. */
  readonly startDedup?: () => Promise<void>;
  readonly app: AppClient;
  readonly sequences: SequenceTracker;
  readonly metrics: WebhookMetrics;
}

/**
 * Passthrough delivery: 200 only after the app answered 2xx, and the event is marked accepted only
 * then. A copy that arrives while the first is being forwarded waits for its outcome and is never
 * forwarded twice; a dedup whose answer is unknown (a slow shared store) is a 503, never a guess.
 */
export class PassthroughMode implements DeliveryMode {
  readonly name = 'passthrough';

  constructor(private readonly o: PassthroughModeOptions) {}

  start(): Promise<void> {
    return this.o.startDedup?.() ?? Promise.resolve();
  }

  async close(): Promise<void> {
    await this.o.dedup.close();
  }

  async deliver(e: VerifiedEvent, steps: StepTrace): Promise<DeliveryResult> {
    const { dedup, metrics } = this.o;
    const target = e.target;
    // Acknowledged here, it would be forgotten: another replica (mid-rollout) may route it, and the
    // service only retries what it did not get a 2xx for. Nothing is claimed for it.
    if (target === null) return UNROUTED;
    const id = e.envelope.id;
    let claim;
    try {
      claim = await steps.step('dedup', () => dedup.claim(id));
    } catch (err) {
      return dedupFailed(err);
    }
    if (claim.kind === 'duplicate') return DUPLICATE;
    if (claim.kind === 'in_flight') {
      // Wait for the first copy. If it fails we answer 503 rather than forward again at once: the
      // app just failed or timed out on this very event, an immediate second try would pile onto
      // it (and could keep the service waiting two timeouts), and the service retries with backoff.
      const outcome = await claim.outcome;
      if (outcome === 'accepted') return DUPLICATE;
      return { kind: 'failed', reason: 'app_unavailable', cause: 'first_copy_failed', quiet: true };
    }

    let settled = false;
    try {
      const outOfOrder = this.o.sequences.observe(e.envelope.sequence);
      const started = performance.now();
      const result = await steps.step('forward', () => this.o.app.forward(target.url, e.rawBody, appHeaders(e.facts(outOfOrder))));
      metrics.forwardDuration.observe(result.ok ? 0 : 1, (performance.now() - started) / 1000);
      metrics.routeForwards.labels(target.label, result.ok ? 'accepted' : 'failed').inc();
      if (!result.ok) {
        metrics.forwardFailures.inc({ cause: result.cause });
        return { kind: 'failed', reason: 'app_unavailable', cause: result.cause, detail: result.detail };
      }
      try {
        await dedup.markAccepted(id, claim.token);
      } catch (err) {
        // The app has it, but copies cannot be known as duplicates: 503, and the retry asks again.
        return dedupFailed(err);
      }
      settled = true;
      return { kind: 'accepted', reason: 'accepted', outOfOrder, appStatus: result.status };
    } finally {
      if (!settled) await dedup.release(id, claim.token).catch(() => undefined);
    }
  }
}

const DUPLICATE: DeliveryResult = Object.freeze({ kind: 'duplicate' });
const UNROUTED: DeliveryResult = Object.freeze({ kind: 'unrouted' });

/** A dedup step that did not answer (slow store) or failed: no promise of "at most once", so 503. */
function dedupFailed(err: unknown): DeliveryResult {
  const slow = hasCode(err, 'ERR_WEBHOOK_DEDUP_UNKNOWN');
  return { kind: 'failed', reason: 'dedup_unavailable', cause: slow ? 'dedup_unknown' : 'dedup_error', ...(slow ? {} : { err }) };
}
