import type { StepTrace } from '../lib/trace.js';
import type { AppTarget } from './app-routes.js';
import type { WebhookEnvelope } from './envelope.js';
import type { DeliveryFacts } from './stored-delivery.js';

/** A delivery whose signature and envelope were verified, with where its event type goes here. */
export interface VerifiedEvent {
  readonly envelope: WebhookEnvelope;
  /** What the delivery carried that the app gets again; `outOfOrder` is the mode's to decide. */
  readonly facts: (outOfOrder: boolean) => DeliveryFacts;
  /** The raw body, unchanged. */
  readonly rawBody: Buffer;
  /**
   * This replica's route for its type; null when none takes it and there is no default (another
   * replica of the fleet may route it: passthrough refuses it, queue mode stores it all the same).
   */
  readonly target: AppTarget | null;
}

/** Why a verified event could not be taken now (503: the service retries). */
export type DeliveryFailure = 'app_unavailable' | 'queue_unavailable' | 'queue_full' | 'dedup_unavailable';

/** What a mode did with one verified event; the ingress counts, logs and answers it. */
export type DeliveryResult =
  | { readonly kind: 'accepted'; readonly reason: 'accepted' | 'queued'; readonly outOfOrder: boolean; readonly appStatus?: number }
  | { readonly kind: 'duplicate' }
  /** Passthrough: no route of this replica takes its type (503 `unrouted`: the service retries, and may reach one that does). */
  | { readonly kind: 'unrouted' }
  | {
      readonly kind: 'failed';
      readonly reason: DeliveryFailure;
      /** The log line's `cause` (`status`, `timeout`, `dedup_unknown`, `first_copy_failed`, …). */
      readonly cause: string;
      readonly detail?: string;
      readonly err?: unknown;
      /** Logged at info, not warn: an expected consequence of another failure. */
      readonly quiet?: boolean;
    };

/**
 * How verified events reach the app (contract, Webhooks, delivery modes): `passthrough` forwards
 * before it answers (dedup, forward, mark accepted); `queue` stores the event and answers, and its
 * workers forward. `buildWebhooks` picks one; the ingress hands it every verified event.
 */
export interface DeliveryMode {
  readonly name: 'passthrough' | 'queue';
  deliver(event: VerifiedEvent, steps: StepTrace): Promise<DeliveryResult>;
  /** Starts what runs in the background (shared dedup's listeners, the queue's workers); never waits for a store. */
  start(): Promise<void>;
  /** Stops; forwards in flight get up to `graceMs`. */
  close(graceMs: number): Promise<void>;
}
