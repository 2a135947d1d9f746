import { randomUUID } from 'node:crypto';
import type { Logger } from '../observability/logger.js';
import { consentActionData, redecNotificationData } from './consent-events.js';
import { ConsentStore, type ConsentChange, type ConsentTarget, type GrantOptions } from './consent-store.js';
import { decide, type CheckResponse } from './decide.js';
import { dsrEventData } from './dsr-events.js';
import { SimulatorError } from './errors.js';
import { DSR_EVENT_TYPES, isEventType, type DsrEventType, type EventEnvelope } from './event-types.js';
import { FaultInjector } from './faults.js';
import type { Fixture, FixtureFlowVersion } from './fixture-types.js';
import { NotificationRequirements } from './redec-requirements.js';
import { WebhookSender } from './webhook-sender.js';

export interface SimulatorCoreOptions {
  readonly fixture: Fixture;
  readonly decisionLifetimeMs: number;
  readonly timeScale: number;
  readonly webhookAttemptTimeoutMs: number;
  readonly now: () => number;
  readonly logger: Logger;
}

/** What a consent operation produced: the action and the events it emitted. */
export interface ConsentActionResult {
  readonly consentActionId: string;
  readonly events: readonly EventEnvelope[];
}

/** The simulator's domain: state, decisions, events and deliveries; no HTTP. */
export class SimulatorCore {
  readonly store: ConsentStore;
  readonly sender: WebhookSender;
  readonly requirements = new NotificationRequirements();
  readonly faults = new FaultInjector();
  private sequence = 0;

  constructor(private readonly options: SimulatorCoreOptions) {
    this.store = new ConsentStore(options.fixture, options.now());
    this.sender = new WebhookSender({
      timeScale: options.timeScale,
      attemptTimeoutMs: options.webhookAttemptTimeoutMs,
      now: options.now,
      logger: options.logger,
    });
  }

  now(): number {
    return this.options.now();
  }

  check(request: { userReference: string; configKey: string }): CheckResponse {
    return decide(this.store, request, this.options.now(), this.options.decisionLifetimeMs);
  }

  /**
   * Emits one event to every subscribed endpoint. For the `data_subject_request.*` types, the
   * documented fields missing from `data` get plausible defaults.
   */
  emit(type: string, data: Readonly<Record<string, unknown>> = {}): EventEnvelope {
    if (!isEventType(type)) throw new SimulatorError('ERR_SIMULATOR_INVALID_INPUT', `type: unknown event type "${type}"`);
    const now = this.options.now();
    const full = (DSR_EVENT_TYPES as readonly string[]).includes(type) ? dsrEventData(type as DsrEventType, data, now) : data;
    this.sequence += 1;
    const envelope: EventEnvelope = { id: `evt_${randomUUID()}`, sequence: this.sequence, type, occurredAt: now, data: full };
    const deliveries = this.sender.publish(envelope);
    this.options.logger.info({ eventId: envelope.id, type, sequence: envelope.sequence, deliveries }, 'event emitted');
    return envelope;
  }

  grant(target: ConsentTarget, options: GrantOptions = {}): ConsentActionResult {
    return this.record(this.store.grant(target, options, this.options.now()));
  }

  revoke(target: ConsentTarget): ConsentActionResult {
    return this.record(this.store.revoke(target, this.options.now()));
  }

  deny(target: ConsentTarget): ConsentActionResult {
    return this.record(this.store.deny(target, this.options.now()));
  }

  expire(target: ConsentTarget): void {
    this.store.expire(target, this.options.now());
  }

  publish(configKey: string, version: unknown): FixtureFlowVersion {
    return this.store.publish(configKey, version);
  }

  /**
   * Adds `count` pending tenant-responsibility obligations without consents or events (a listing
   * of volume, for measuring the reconciler). Returns how many were added.
   */
  seedObligations(count: number): number {
    const now = this.options.now();
    for (let i = 0; i < count; i++) {
      const n = randomUUID();
      this.requirements.add({
        redecConsentId: `rdc_seed_${n}`,
        consentActionId: `cact_seed_${n}`,
        notificationReason: 'grant',
        deliveryResponsibility: 'tenant',
        customerTenantId: 'seed',
        createdAt: now,
      });
    }
    return count;
  }

  async close(): Promise<void> {
    await this.sender.close();
  }

  private record(change: ConsentChange): ConsentActionResult {
    const events = [this.emit('consent_action.created', consentActionData(change))];
    const redec = redecNotificationData(change);
    if (redec && change.consent.redec && change.redecConsentId && change.action !== 'deny') {
      this.requirements.add({
        redecConsentId: change.redecConsentId,
        consentActionId: change.consentActionId,
        notificationReason: change.action === 'grant' ? 'grant' : 'revoke',
        deliveryResponsibility: change.consent.redec.deliveryResponsibility,
        customerTenantId: change.customer.userReference,
        createdAt: change.occurredAt,
      });
      events.push(this.emit('redec.notification.required', redec));
    }
    return { consentActionId: change.consentActionId, events };
  }
}
