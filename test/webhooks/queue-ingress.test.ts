import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/observability/index.js';
import { createRegistry } from '../../src/observability/registry.js';
import { appHeaders, buildWebhooks, decodeStored, type Enqueued, type ForwardClaim, type QueueBatch, type QueuedEvent, type QueueEntry, type QueueStats, type QueueStore, type RouterListing } from '../../src/webhooks/index.js';
import { deliveryHeaders, envelope, metricValue, nowS, post, RecordingRevocations, SECRET_A, startApp, startWebhookListener, webhookConfig, type FakeApp } from '../helpers/webhooks.js';

/**
 * The ingress in queue mode, through the real listener: what it hands the queue, and what it answers
 * when the queue does not take the event. The queue's store here is a recording stand-in that
 * stores and hands nothing back, so its workers never forward (the Redis one is tested in
 * test/redis/webhook-queue.test.ts and test/e2e/queue-mode.test.ts).
 */
class RecordingQueue implements QueueStore {
  readonly routesAt = 'routes';
  /** What was enqueued, read back as the worker would decode it. */
  readonly events: QueuedEvent[] = [];
  failing = false;
  async enqueue(eventId: string, json: string): Promise<Enqueued> {
    if (this.failing) throw new Error('Redis is not connected');
    if (this.events.some((e) => e.facts.eventId === eventId)) return { outcome: 'duplicate', displaced: false };
    const stored = decodeStored(json)!;
    const { id, timestamp, signature, deliveryId, outOfOrder } = stored;
    this.events.push({
      facts: { eventId: id, timestamp, signature, ...(deliveryId !== undefined ? { deliveryId } : {}), ...(outOfOrder !== undefined ? { outOfOrder } : {}) },
      body: Buffer.from(stored.body, 'base64'),
    });
    return { outcome: 'queued', displaced: false };
  }
  readNew = async (): Promise<QueueBatch> => ({ entries: [], oversized: 0 });
  readPending = async (): Promise<QueueBatch> => ({ entries: [], oversized: 0 });
  takeOver = async (): Promise<QueueBatch> => ({ entries: [], oversized: 0 });
  deliveredMarks = async (ids: readonly string[]): Promise<(string | null)[]> => ids.map(() => null);
  claimForward = async (): Promise<ForwardClaim> => ({ kind: 'claimed', displaced: false });
  releaseForward = async (): Promise<void> => undefined;
  markDelivered = async (): Promise<void> => undefined;
  drop = async (): Promise<void> => undefined;
  retryLater = async (): Promise<boolean> => true;
  deadLetter = async (): Promise<boolean> => true;
  handOver = async (): Promise<boolean> => true;
  advertiseRoutes = async (): Promise<void> => undefined;
  forgetRoutes = async (): Promise<void> => undefined;
  routers = async (): Promise<RouterListing> => ({ tables: [], whole: true });
  promoteDue = async (): Promise<number> => 0;
  stats = async (): Promise<QueueStats> => ({ depth: this.events.length, oldestAcceptedAt: null, deadLetters: 0 });
  sweepConsumers = async (): Promise<void> => undefined;
  listDead = async (): Promise<QueueEntry[]> => [];
  replayDead = async (): Promise<boolean> => false;
  exists = async (): Promise<boolean> => true;
  onWake = async (): Promise<void> => undefined;
  onDelivered = async (): Promise<void> => undefined;
  onHandedOver = async (): Promise<void> => undefined;
  onRestored = (): void => undefined;
}

/** Shared dedup is not used in queue mode; a claim store that is never called. */
const NO_CLAIMS = {} as never;

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.allSettled(closers.splice(0).map((c) => c()));
});

async function start(queue: RecordingQueue): Promise<{ url: string; app: FakeApp; registry: ReturnType<typeof createRegistry>; revocations: RecordingRevocations }> {
  const app = await startApp();
  const registry = createRegistry({ defaultMetrics: false });
  const revocations = new RecordingRevocations();
  const listener = await startWebhookListener({ config: { ...webhookConfig({ appUrl: app.url }), delivery: 'queue' }, registry, revocations, shared: { claims: NO_CLAIMS, queue } });
  closers.push(() => listener.close(), () => app.close());
  return { url: listener.url, app, registry, revocations };
}

describe('webhook ingress, queue mode', () => {
  it('refuses to build in queue mode without a queue', () => {
    const ports = { logger: silentLogger(), registry: createRegistry({ defaultMetrics: false }), revocations: new RecordingRevocations(), now: Date.now, tracer: null, shared: null };
    expect(() => buildWebhooks({ ...webhookConfig({ appUrl: 'http://127.0.0.1:1/h' }), delivery: 'queue' }, ports)).toThrow(/needs a queue/);
  });

  it('a verified event is queued with the passthrough headers and the raw body, answered 200 queued, never forwarded by the ingress; a copy the queue calls a duplicate is answered so', async () => {
    const queue = new RecordingQueue();
    const { url, app, registry } = await start(queue);
    const body = envelope({ id: 'evt_q1', type: 'consent_action.created', data: { action: 'revoke', userReference: 'alice' } });
    const headers = deliveryHeaders(SECRET_A, nowS(), body, 'evt_header_lies');
    expect(await post(url, body, headers)).toEqual({ status: 200, body: '{"status":"queued"}' });
    expect(queue.events).toHaveLength(1);
    const [e] = queue.events;
    expect(e!.facts.eventId).toBe('evt_q1');
    // The type is no longer stored beside the body: it is read from the signed body itself.
    expect((JSON.parse(e!.body.toString()) as { type: string }).type).toBe('consent_action.created');
    expect(e!.body.equals(body)).toBe(true);
    expect(appHeaders(e!.facts)).toEqual({
      'content-type': 'application/json',
      'x-service-event-id': 'evt_q1',
      'x-service-delivery-id': headers['x-service-delivery-id'],
      'x-service-timestamp': headers['x-service-timestamp'],
      'x-service-signature': headers['x-service-signature'],
      'x-consent-sidecar-verified': 'v1',
    });
    expect(app.received).toHaveLength(0);
    expect(await post(url, body, deliveryHeaders(SECRET_A, nowS(), body))).toEqual({ status: 200, body: '{"status":"duplicate"}' });
    expect(queue.events).toHaveLength(1);
    expect(await metricValue(registry, 'consent_sidecar_webhook_deliveries_total', { outcome: 'accepted' })).toBe(1);
  });

  it('revocations are purged at ingress, before the queue', async () => {
    const queue = new RecordingQueue();
    const { url, revocations } = await start(queue);
    const body = envelope({ id: 'evt_rev', type: 'consent_action.created', data: { action: 'revoke', userReference: 'bob' } });
    queue.failing = true;
    expect((await post(url, body, deliveryHeaders(SECRET_A, nowS(), body))).status).toBe(503);
    expect(revocations.calls).toContain('user:bob');
  });

  it('the queue does not take it: 503 queue_unavailable, counted failed; the service retry is queued once the queue takes it', async () => {
    const queue = new RecordingQueue();
    const { url, registry } = await start(queue);
    const body = envelope({ id: 'evt_q2' });
    queue.failing = true;
    expect(await post(url, body, deliveryHeaders(SECRET_A, nowS(), body))).toEqual({ status: 503, body: '{"error":"queue_unavailable"}' });
    expect(await metricValue(registry, 'consent_sidecar_webhook_deliveries_total', { outcome: 'failed' })).toBe(1);
    queue.failing = false;
    expect(await post(url, body, deliveryHeaders(SECRET_A, nowS(), body))).toEqual({ status: 200, body: '{"status":"queued"}' });
    expect(queue.events.map((e) => e.facts.eventId)).toEqual(['evt_q2']);
  });
});
