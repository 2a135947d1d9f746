import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { silentLogger, type Logger } from '../observability/logger.js';
import { formatHostPort } from '../lib/listen-address.js';
import { simulatorApp } from './app.js';
import type { ConsentTarget, GrantOptions } from './consent-store.js';
import { SimulatorError } from './errors.js';
import type { EventEnvelope } from './event-types.js';
import { validateFault, type FaultSpec } from './faults.js';
import { loadFixture } from './fixture-load.js';
import type { FixtureFlowVersion } from './fixture-types.js';
import type { NotificationRequirementPage } from './redec-requirements.js';
import { SimulatorCore, type ConsentActionResult } from './simulator-core.js';
import type { WebhookEndpoint, WebhookEndpointInput } from './webhook-endpoints.js';
import type { DeliveryTimeline } from './webhook-sender.js';

/** API key the simulator accepts when none is given (it is a simulator: not a secret). */
export const DEFAULT_SIMULATOR_API_KEY = 'sim_test_key';
/** Upper bound of an ALLOW's `validUntil` after the decision (ms): 5 minutes. */
export const DEFAULT_DECISION_LIFETIME_MS = 300_000;
/** Real-time deadline of one webhook attempt (ms); the document does not show the service's. */
export const DEFAULT_WEBHOOK_ATTEMPT_TIMEOUT_MS = 10_000;

/** Options of {@link startSimulator}. */
export interface SimulatorOptions {
  /** Default `127.0.0.1`. */
  readonly host?: string;
  /** Default 0 (a free port; the CLI defaults to 7800). */
  readonly port?: number;
  /** Bearer key the `/v1/*` routes require. Default {@link DEFAULT_SIMULATOR_API_KEY}. */
  readonly apiKey?: string;
  /** A fixture object, a path to a JSON fixture, or nothing for the shipped default. */
  readonly fixtures?: unknown;
  /** Service time runs this many times faster than real time for webhook retries. Default 1. */
  readonly timeScale?: number;
  /** `validUntil` is at most this long after the decision (ms). Default 300 000. */
  readonly decisionLifetimeMs?: number;
  /** Latency added to every check (ms). Default 0. */
  readonly latencyMs?: number;
  /** Real-time deadline of one webhook attempt (ms). Default 10 000. */
  readonly webhookAttemptTimeoutMs?: number;
  /** When set, the control surface requires header `x-simulator-control-token` with this value. */
  readonly controlToken?: string;
  /** Endpoints registered at start. */
  readonly webhookEndpoints?: readonly WebhookEndpointInput[];
  /**
   * Epoch-ms clock of decisions, `occurredAt`, timelines and `x-service-timestamp`. Default
   * `Date.now`. Keep it near real time when deliveries go to a receiver that checks timestamps.
   */
  readonly now?: () => number;
  /** Default: silent. */
  readonly logger?: Logger;
}

/** A running simulator. */
export interface SimulatorHandle {
  /** The service's `{base_url}`, e.g. `http://127.0.0.1:7800`. */
  readonly url: string;
  readonly apiKey: string;
  /** Grants (or re-grants) a consent; emits `consent_action.created` and, for REDEC, `redec.notification.required`. */
  grantConsent(input: ConsentTarget & GrantOptions): ConsentActionResult;
  revokeConsent(input: ConsentTarget): ConsentActionResult;
  /** Records that the customer declined (no current grant); emits `consent_action.created` with `action: "deny"`. */
  denyConsent(input: ConsentTarget): ConsentActionResult;
  /** Ends a grant now; no event (the document has none for an expiry). */
  expireConsent(input: ConsentTarget): void;
  /** Adds a version to a Flow; `version` defaults to the next number, `published` to true. */
  publishFlowVersion(configKey: string, version: Partial<FixtureFlowVersion> & Pick<FixtureFlowVersion, 'consents'>): FixtureFlowVersion;
  registerWebhookEndpoint(input: WebhookEndpointInput): WebhookEndpoint;
  emitEvent(type: string, data?: Readonly<Record<string, unknown>>): EventEnvelope;
  injectFault(fault: FaultSpec): void;
  clearFaults(): void;
  deliveries(): DeliveryTimeline[];
  /** Resolves once every delivery is accepted or terminal. */
  deliveriesSettled(): Promise<void>;
  notificationRequirements(query?: { status?: string; limit?: number; cursor?: string }): NotificationRequirementPage;
  close(): Promise<void>;
}

function positive(name: string, value: number | undefined, fallback: number, min: number): number {
  const v = value ?? fallback;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min) {
    throw new SimulatorError('ERR_SIMULATOR_OPTIONS_INVALID', `${name}: expected a number >= ${min}, got ${String(value)}`);
  }
  return v;
}

/**
 * Starts the simulator of the consent service on `host:port`.
 *
 * @example
 * const sim = await startSimulator({ port: 0, timeScale: 600 });
 * await fetch(`${sim.url}/v1/authorization/check`, { method: 'POST',
 *   headers: { authorization: `Bearer ${sim.apiKey}`, 'content-type': 'application/json' },
 *   body: JSON.stringify({ userReference: 'alice', configKey: 'marketing-email' }) });
 * await sim.close();
 */
export async function startSimulator(options: SimulatorOptions = {}): Promise<SimulatorHandle> {
  const timeScale = positive('timeScale', options.timeScale, 1, Number.MIN_VALUE);
  const decisionLifetimeMs = positive('decisionLifetimeMs', options.decisionLifetimeMs, DEFAULT_DECISION_LIFETIME_MS, 1);
  const latencyMs = positive('latencyMs', options.latencyMs, 0, 0);
  const webhookAttemptTimeoutMs = positive('webhookAttemptTimeoutMs', options.webhookAttemptTimeoutMs, DEFAULT_WEBHOOK_ATTEMPT_TIMEOUT_MS, 1);
  const apiKey = options.apiKey ?? DEFAULT_SIMULATOR_API_KEY;
  if (apiKey === '' || /\s/.test(apiKey)) throw new SimulatorError('ERR_SIMULATOR_OPTIONS_INVALID', 'apiKey: expected a non-empty token');
  const logger = options.logger ?? silentLogger();
  const fixture = await loadFixture(options.fixtures);
  const core = new SimulatorCore({
    fixture,
    decisionLifetimeMs,
    timeScale,
    webhookAttemptTimeoutMs,
    now: options.now ?? Date.now,
    logger,
  });
  for (const endpoint of options.webhookEndpoints ?? []) core.sender.register(endpoint);

  const server = createServer(simulatorApp(core, { apiKey, latencyMs, controlToken: options.controlToken, logger }));
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const url = `http://${formatHostPort(host, (server.address() as AddressInfo).port)}`;
  logger.info({ url, timeScale, decisionLifetimeMs, latencyMs }, 'simulator listening');

  let closing: Promise<void> | undefined;
  return {
    url,
    apiKey,
    grantConsent: (input) => core.grant(input, input),
    revokeConsent: (input) => core.revoke(input),
    denyConsent: (input) => core.deny(input),
    expireConsent: (input) => core.expire(input),
    publishFlowVersion: (configKey, version) => core.publish(configKey, version),
    registerWebhookEndpoint: (input) => core.sender.register(input),
    emitEvent: (type, data) => core.emit(type, data),
    injectFault: (fault) => core.faults.set(validateFault(fault)),
    clearFaults: () => core.faults.clear(),
    deliveries: () => core.sender.timelines(),
    deliveriesSettled: () => core.sender.settled(),
    notificationRequirements: (query = {}) => core.requirements.list(query),
    close() {
      closing ??= (async () => {
        await core.close();
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
      })();
      return closing;
    },
  };
}
