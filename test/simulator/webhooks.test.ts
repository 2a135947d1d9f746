import { createHmac, timingSafeEqual } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import {
  DSR_EVENT_TYPES,
  retryDelayMs,
  startSimulator,
  type EventEnvelope,
  type SimulatorHandle,
} from '../../src/simulator/index.js';
import { signDelivery } from '../../src/simulator/signature.js';
import { scheduleLog, startReceiver, until, type Receiver } from '../helpers/simulator.js';

const SECRET = 'whsec_test_secret';
let sim: SimulatorHandle | undefined;
let receiver: Receiver | undefined;
afterEach(async () => {
  await sim?.close();
  await receiver?.close();
  sim = undefined;
  receiver = undefined;
});

/** Independent of the code under test: node:crypto over the raw bytes received. */
function verified(headers: Record<string, string | string[] | undefined>, raw: string, secret = SECRET): boolean {
  const ts = String(headers['x-service-timestamp']);
  const sig = String(headers['x-service-signature']);
  const expected = `v1=${createHmac('sha256', secret).update(`${ts}.${raw}`).digest('hex')}`;
  return sig.length === expected.length && timingSafeEqual(Buffer.from(sig), Buffer.from(expected));
}

describe('signature', () => {
  it('matches an openssl fixture vector (openssl dgst -sha256 -hmac whsec_test_secret)', () => {
    const body = '{"id":"evt_1","sequence":1,"type":"consent_action.created","occurredAt":1767225600000,"data":{}}';
    expect(signDelivery(SECRET, 1767225600, body)).toBe('v1=4845f06a5e20b7266d59614d2c9d96920b18b6f6bae48e56c0775f229d47bd77');
  });
});

describe('backoff schedule', () => {
  it('doubles from 1 minute, caps at 15 minutes, stops after the 8th attempt', () => {
    const minutes = [1, 2, 3, 4, 5, 6, 7].map((n) => (retryDelayMs(n) as number) / 60_000);
    expect(minutes).toEqual([1, 2, 4, 8, 15, 15, 15]);
    expect(retryDelayMs(8)).toBeUndefined();
  });
});

describe('webhook deliveries', () => {
  it('signs each delivery as documented, with every documented header and the custom header', async () => {
    receiver = await startReceiver();
    sim = await startSimulator();
    sim.registerWebhookEndpoint({ url: receiver.url, secret: SECRET, header: 'Authorization: Bearer tenant-token' });
    const { events } = sim.revokeConsent({ userReference: 'alice', configKey: 'marketing-email' });
    await sim.deliveriesSettled();
    expect(receiver.received).toHaveLength(1);
    const [got] = receiver.received;
    const h = got!.headers;
    expect(h['content-type']).toBe('application/json');
    expect(h['user-agent']).toBe('Service-Webhooks/1.0');
    expect(h.authorization).toBe('Bearer tenant-token');
    expect(h['x-service-event-id']).toBe(events[0]!.id);
    expect(h['x-service-delivery-id']).toMatch(/^dlv_/);
    expect(Math.abs(Number(h['x-service-timestamp']) - Date.now() / 1000)).toBeLessThan(5);
    expect(h['x-service-signature']).toMatch(/^v1=[0-9a-f]{64}$/);
    expect(verified(h, got!.raw)).toBe(true);
    expect(verified(h, got!.raw, 'whsec_other')).toBe(false);

    const envelope = JSON.parse(got!.raw) as EventEnvelope;
    expect(Object.keys(envelope).sort()).toEqual(['data', 'id', 'occurredAt', 'sequence', 'type']);
    expect(envelope.type).toBe('consent_action.created');
    expect(envelope.data).toMatchObject({
      action: 'revoke',
      userReference: 'alice',
      customerId: 'cus_alice',
      configKey: 'marketing-email',
      consentId: 'con_marketing_email',
    });
    expect(sim.deliveries()[0]).toMatchObject({ state: 'accepted', attempts: [{ attempt: 1, status: 200 }] });
  });

  it('rejects a custom header that would replace a reserved one', async () => {
    sim = await startSimulator();
    for (const header of ['x-service-signature: x', 'Content-Type: text/plain', 'Host: evil', 'NoColon', 'X-Ok:']) {
      expect(() => sim!.registerWebhookEndpoint({ url: 'http://127.0.0.1:1/', secret: SECRET, header })).toThrow(
        expect.objectContaining({ code: 'ERR_SIMULATOR_INVALID_INPUT' }),
      );
    }
    expect(() => sim!.registerWebhookEndpoint({ url: 'http://127.0.0.1:1/', secret: 'nope' })).toThrow(/secret/);
    expect(() => sim!.registerWebhookEndpoint({ url: 'http://127.0.0.1:1/', secret: SECRET, types: ['x.y'] })).toThrow(/types\[0\]/);
  });

  it('delivers only subscribed types, with a global monotonic sequence', async () => {
    receiver = await startReceiver();
    sim = await startSimulator();
    sim.registerWebhookEndpoint({ url: receiver.url, secret: SECRET, types: ['redec.notification.required'] });
    sim.revokeConsent({ userReference: 'alice', configKey: 'credit-report' });
    sim.grantConsent({ userReference: 'alice', configKey: 'credit-report' });
    await sim.deliveriesSettled();
    const envelopes = receiver.received.map((r) => JSON.parse(r.raw) as EventEnvelope);
    expect(envelopes.map((e) => e.type)).toEqual(['redec.notification.required', 'redec.notification.required']);
    // consent_action.created took sequence numbers too: the endpoint sees gaps, as the document allows
    expect(envelopes.map((e) => e.sequence)).toEqual([2, 4]);
  });

  it('retries with a new delivery id and a fresh timestamp per attempt, accepted once the endpoint recovers', async () => {
    let calls = 0;
    receiver = await startReceiver(() => (++calls <= 2 ? 503 : 204));
    // timeScale 60 000: one minute of service time is one millisecond
    sim = await startSimulator({ timeScale: 60_000 });
    sim.registerWebhookEndpoint({ url: receiver.url, secret: SECRET });
    const env = sim.emitEvent('redec.access.occurred', { result: 'accessed' });
    await sim.deliveriesSettled();
    expect(receiver.received).toHaveLength(3);
    const ids = receiver.received.map((r) => r.headers['x-service-delivery-id']);
    expect(new Set(ids).size).toBe(3);
    expect(new Set(receiver.received.map((r) => r.headers['x-service-event-id']))).toEqual(new Set([env.id]));
    for (const r of receiver.received) expect(verified(r.headers, r.raw)).toBe(true);
    expect(sim.deliveries()[0]).toMatchObject({
      state: 'accepted',
      attempts: [{ status: 503 }, { status: 503 }, { status: 204 }],
    });
  });

  it('treats network errors as failures and goes terminal after the 8th attempt, on the documented schedule', async () => {
    // real time: timeScale 3000 makes the ~60 minutes of backoff take ~1.2 s
    const timeScale = 3000;
    const log = scheduleLog();
    sim = await startSimulator({ timeScale, logger: log.logger });
    sim.registerWebhookEndpoint({ url: 'http://127.0.0.1:9/dead', secret: SECRET });
    const env = sim.emitEvent('data_subject_request.created');
    await sim.deliveriesSettled();
    const [timeline] = sim.deliveries();
    expect(timeline!.state).toBe('terminal');
    expect(timeline!.attempts).toHaveLength(8);
    for (const a of timeline!.attempts) expect(a.error).toBeTruthy();
    // The delays the sender set are the schedule, exactly; no attempt ran before its delay was up. How
    // late one ran (it was: less than 150 ms) is the machine's load, not the simulator's: the schedule
    // is proven to the millisecond on frozen time in webhook-schedule.test.ts.
    const expected = [1, 2, 4, 8, 15, 15, 15].map((m) => (m * 60_000) / timeScale);
    expect(log.retries(env.id)).toEqual(expected);
    const gaps = timeline!.attempts.slice(1).map((a, i) => a.startedAt - timeline!.attempts[i]!.startedAt);
    gaps.forEach((gap, i) => expect(gap).toBeGreaterThanOrEqual(expected[i]! - 2));
    expect(log.outcomes(env.id).at(-1)).toBe('terminal');
  });

  it('carries the documented data fields on every data_subject_request.* type', async () => {
    receiver = await startReceiver();
    sim = await startSimulator();
    sim.registerWebhookEndpoint({ url: receiver.url, secret: SECRET });
    for (const type of DSR_EVENT_TYPES) sim.emitEvent(type, type.endsWith('.created') ? { customerId: 'cus_bob' } : {});
    await sim.deliveriesSettled();
    const byType = new Map(receiver.received.map((r) => JSON.parse(r.raw) as EventEnvelope).map((e) => [e.type, e.data]));
    expect(byType.size).toBe(7);
    const common = ['schemaVersion', 'requestId', 'customerId', 'rightType', 'status', 'requestVersion'];
    const intermediate = ['previousStatus', 'dueAt', 'actorType'];
    const specific: Record<string, string[]> = {
      'data_subject_request.created': ['dueAt'],
      'data_subject_request.review_started': intermediate,
      'data_subject_request.additional_information_requested': intermediate,
      'data_subject_request.additional_information_received': [...intermediate, 'respondsToInformationRequest', 'attachmentCount'],
      'data_subject_request.deadline_extended': [...intermediate, 'previousDueAt'],
      'data_subject_request.resolved': ['resolutionOutcome', 'fulfillmentRequired'],
      'data_subject_request.fulfillment_confirmed': [...intermediate, 'outcome', 'performedAt', 'recordedAt'],
    };
    for (const [type, data] of byType) {
      for (const field of [...common, ...(specific[type] ?? [])]) expect(data, `${type}.${field}`).toHaveProperty(field);
      expect(data.schemaVersion).toBe(1);
      if ('actorType' in data) expect(['data_subject', 'tenant_user']).toContain(data.actorType);
    }
    expect(byType.get('data_subject_request.created')).toMatchObject({ requestVersion: 1, customerId: 'cus_bob' });
    expect(byType.get('data_subject_request.review_started')).toMatchObject({ status: 'in_review' });
    const extended = byType.get('data_subject_request.deadline_extended')!;
    expect(extended.dueAt as number).toBeGreaterThan(extended.previousDueAt as number);
    expect(['resolved', 'partially_resolved', 'rejected']).toContain(byType.get('data_subject_request.resolved')!.resolutionOutcome);
    expect(['confirmed', 'partially_confirmed']).toContain(byType.get('data_subject_request.fulfillment_confirmed')!.outcome);
  });

  it('raises redec.notification.required for grant and revoke with the documented fields', async () => {
    receiver = await startReceiver();
    sim = await startSimulator();
    sim.registerWebhookEndpoint({ url: receiver.url, secret: SECRET, types: ['redec.notification.required'] });
    sim.revokeConsent({ userReference: 'alice', configKey: 'credit-report' }); // tenant, revoke
    sim.grantConsent({ userReference: 'bob', configKey: 'open-finance' }); // service, grant
    await sim.deliveriesSettled();
    const [revoke, grant] = receiver.received.map((r) => (JSON.parse(r.raw) as EventEnvelope).data);
    const shared = ['redec_consent_id', 'internal_consent_code', 'consent_action_id', 'channel_policy', 'channel', 'finality_code', 'objective_codes', 'medium_code'];
    expect(revoke).toMatchObject({ notification_reason: 'revoke', delivery_responsibility: 'tenant', customer_tenant_id: 'alice', channel_policy: 'tenant_determined', channel: 'digital' });
    for (const f of [...shared, 'revoked_at']) expect(revoke).toHaveProperty(f);
    for (const f of ['granted_at', 'initial_access_valid_until', 'designation_id']) expect(revoke).not.toHaveProperty(f);
    expect(grant).toMatchObject({ notification_reason: 'grant', delivery_responsibility: 'service', customer_tenant_id: 'bob' });
    for (const f of [...shared, 'granted_at', 'initial_access_valid_until', 'designation_id']) expect(grant).toHaveProperty(f);
    expect(grant).not.toHaveProperty('revoked_at');
    expect(grant!.initial_access_valid_until as number).toBeGreaterThan(grant!.granted_at as number);
    for (const data of [revoke, grant]) expect(JSON.stringify(data)).not.toMatch(/@|email/i);
  });

  it('stops retrying on close', async () => {
    sim = await startSimulator({ timeScale: 1 });
    sim.registerWebhookEndpoint({ url: 'http://127.0.0.1:9/dead', secret: SECRET });
    sim.emitEvent('redec.access.failed');
    await until(() => sim!.deliveries()[0]?.state === 'retry_scheduled');
    const timeline = sim.deliveries()[0]!;
    expect(timeline.nextAttemptAt! - timeline.attempts[0]!.startedAt).toBeGreaterThanOrEqual(60_000);
    await sim.close();
    await expect(sim.deliveriesSettled()).resolves.toBeUndefined();
  });
});
