import { randomUUID } from 'node:crypto';
import type { Logger } from '../observability/logger.js';
import { Agent, request } from 'undici';
import { MAX_DELIVERY_ATTEMPTS, retryDelayMs } from './backoff.js';
import type { EventEnvelope } from './event-types.js';
import { signDelivery } from './signature.js';
import { validateEndpoint, type WebhookEndpoint, type WebhookEndpointInput } from './webhook-endpoints.js';

/** The document's delivery states. */
export type DeliveryState = 'attempting' | 'retry_scheduled' | 'accepted' | 'terminal';

/** Characters of an endpoint's answer body kept with its attempt (what the sidecar said: `{"status":"duplicate"}`). */
export const ATTEMPT_ANSWER_CHARS = 512;

/**
 * One attempt: `startedAt` is epoch ms (simulator clock); `status` when the endpoint answered, and
 * `answer`, the first {@link ATTEMPT_ANSWER_CHARS} characters of its body.
 */
export interface DeliveryAttempt {
  readonly attempt: number;
  readonly deliveryId: string;
  readonly startedAt: number;
  readonly timestampS: number;
  readonly status?: number;
  readonly answer?: string;
  readonly error?: string;
}

/** The timeline of one delivery of one event to one endpoint. `nextAttemptAt` is epoch ms. */
export interface DeliveryTimeline {
  readonly eventId: string;
  readonly eventType: string;
  readonly endpointId: string;
  readonly state: DeliveryState;
  readonly attempts: readonly DeliveryAttempt[];
  readonly nextAttemptAt?: number;
}

export interface WebhookSenderOptions {
  /** Service time runs this many times faster: a 1-minute backoff waits 60 000 / timeScale ms. */
  readonly timeScale: number;
  /** Deadline of one attempt (ms, real time); the document does not show the service's. */
  readonly attemptTimeoutMs: number;
  readonly now: () => number;
  readonly logger: Logger;
}

interface Delivery {
  endpoint: WebhookEndpoint;
  envelope: EventEnvelope;
  body: string;
  state: DeliveryState;
  attempts: DeliveryAttempt[];
  nextAttemptAt?: number;
  timer?: NodeJS.Timeout;
}

/** Sends signed deliveries and follows the document's delivery state machine. */
export class WebhookSender {
  private readonly endpointList: WebhookEndpoint[] = [];
  private readonly all: Delivery[] = [];
  private readonly active = new Set<Delivery>();
  private idleWaiters: (() => void)[] = [];
  private readonly agent = new Agent({ connections: 16 });
  private closed = false;

  constructor(private readonly options: WebhookSenderOptions) {}

  register(input: WebhookEndpointInput): WebhookEndpoint {
    const endpoint = validateEndpoint(`we_${this.endpointList.length + 1}`, input);
    this.endpointList.push(endpoint);
    this.options.logger.info(
      { endpointId: endpoint.id, url: endpoint.url, types: endpoint.types ?? 'all', customHeader: endpoint.header?.name },
      'webhook endpoint registered',
    );
    return endpoint;
  }

  endpoints(): readonly WebhookEndpoint[] {
    return [...this.endpointList];
  }

  /** Starts one delivery per subscribed endpoint; returns how many. */
  publish(envelope: EventEnvelope): number {
    if (this.closed) return 0;
    const body = JSON.stringify(envelope);
    let count = 0;
    for (const endpoint of this.endpointList) {
      if (endpoint.types && !endpoint.types.includes(envelope.type as never)) continue;
      const delivery: Delivery = { endpoint, envelope, body, state: 'attempting', attempts: [] };
      this.all.push(delivery);
      this.active.add(delivery);
      void this.attempt(delivery);
      count += 1;
    }
    return count;
  }

  /**
   * Delivers a past event again, unchanged (same envelope `id`, a new delivery id and signature), to
   * every endpoint subscribed now; returns how many, or null when no such event was sent.
   */
  resend(eventId: string): { envelope: EventEnvelope; deliveries: number } | null {
    const past = this.all.find((d) => d.envelope.id === eventId);
    return past ? { envelope: past.envelope, deliveries: this.publish(past.envelope) } : null;
  }

  timelines(): DeliveryTimeline[] {
    return this.all.map((d) => ({
      eventId: d.envelope.id,
      eventType: d.envelope.type,
      endpointId: d.endpoint.id,
      state: d.state,
      attempts: [...d.attempts],
      ...(d.nextAttemptAt !== undefined ? { nextAttemptAt: d.nextAttemptAt } : {}),
    }));
  }

  /** Resolves once no delivery is attempting or scheduled (every one accepted or terminal). */
  settled(): Promise<void> {
    if (this.active.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const d of this.active) clearTimeout(d.timer);
    this.active.clear();
    this.wakeIdle();
    await this.agent.destroy();
  }

  private async attempt(delivery: Delivery): Promise<void> {
    const { endpoint, envelope, body } = delivery;
    const startedAt = this.options.now();
    const timestampS = Math.floor(startedAt / 1000);
    const deliveryId = `dlv_${randomUUID()}`;
    delivery.state = 'attempting';
    delete delivery.nextAttemptAt;
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'user-agent': 'Service-Webhooks/1.0',
      'x-service-event-id': envelope.id,
      'x-service-delivery-id': deliveryId,
      'x-service-timestamp': String(timestampS),
      'x-service-signature': signDelivery(endpoint.secret, timestampS, body),
    };
    if (endpoint.header) headers[endpoint.header.name] = endpoint.header.value;
    const attempt = delivery.attempts.length + 1;
    let status: number | undefined;
    let answer = '';
    let error: string | undefined;
    try {
      const res = await request(endpoint.url, {
        method: 'POST',
        headers,
        body,
        dispatcher: this.agent,
        headersTimeout: this.options.attemptTimeoutMs,
        bodyTimeout: this.options.attemptTimeoutMs,
      });
      status = res.statusCode;
      // Read to its end (the connection is kept), keeping the beginning: what the endpoint said.
      for await (const chunk of res.body) if (answer.length < ATTEMPT_ANSWER_CHARS) answer += (chunk as Buffer).toString('utf8');
    } catch (err) {
      error = (err as { code?: string }).code ?? (err as Error).message;
    }
    if (this.closed) return;
    delivery.attempts.push({
      attempt,
      deliveryId,
      startedAt,
      timestampS,
      ...(status !== undefined ? { status, answer: answer.slice(0, ATTEMPT_ANSWER_CHARS) } : {}),
      ...(error !== undefined ? { error } : {}),
    });
    const log = { eventId: envelope.id, type: envelope.type, endpointId: endpoint.id, attempt, status, error };
    if (status !== undefined && status >= 200 && status < 300) {
      this.finish(delivery, 'accepted');
      this.options.logger.info(log, 'webhook delivery accepted');
      return;
    }
    const delay = retryDelayMs(attempt);
    if (delay === undefined || attempt >= MAX_DELIVERY_ATTEMPTS) {
      this.finish(delivery, 'terminal');
      this.options.logger.warn(log, 'webhook delivery terminal');
      return;
    }
    const realDelay = delay / this.options.timeScale;
    delivery.state = 'retry_scheduled';
    delivery.nextAttemptAt = this.options.now() + realDelay;
    delivery.timer = setTimeout(() => void this.attempt(delivery), realDelay);
    this.options.logger.info({ ...log, retryInMs: realDelay }, 'webhook delivery retry scheduled');
  }

  private finish(delivery: Delivery, state: 'accepted' | 'terminal'): void {
    delivery.state = state;
    this.active.delete(delivery);
    if (this.active.size === 0) this.wakeIdle();
  }

  private wakeIdle(): void {
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }
}
