import { createHmac } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatorHandle } from '../../src/simulator/index.js';
import { check, startReceiver, type Receiver } from '../helpers/simulator.js';

const KEY = 'k_ctl';
let sim: SimulatorHandle | undefined;
let receiver: Receiver | undefined;
afterEach(async () => {
  await sim?.close();
  await receiver?.close();
  sim = undefined;
  receiver = undefined;
});

async function ctl(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${sim!.url}/_simulator${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: (await res.json()) as any };
}

describe('control surface over HTTP', () => {
  it('registers an endpoint, revokes, and the verified event arrives; the check turns to DENY', async () => {
    receiver = await startReceiver();
    sim = await startSimulator({ apiKey: KEY });
    const reg = await ctl('POST', '/webhook-endpoints', { url: receiver.url, secret: 'whsec_ctl', types: ['consent_action.created'] });
    expect(reg.status).toBe(201);
    expect(reg.body).not.toHaveProperty('secret');
    const revoked = await ctl('POST', '/consents/revoke', { userReference: 'alice', configKey: 'marketing-email' });
    expect(revoked.status).toBe(200);
    await sim.deliveriesSettled();
    const got = receiver.received[0]!;
    const expected = createHmac('sha256', 'whsec_ctl').update(`${got.headers['x-service-timestamp']}.${got.raw}`).digest('hex');
    expect(got.headers['x-service-signature']).toBe(`v1=${expected}`);
    expect((await check(sim.url, KEY, { userReference: 'alice', configKey: 'marketing-email' })).body.decision).toBe('DENY');
    const deliveries = await ctl('GET', '/deliveries');
    expect(deliveries.body[0]).toMatchObject({ state: 'accepted', eventId: revoked.body.events[0].id });
  });

  it('grants, expires, publishes, emits and sets faults', async () => {
    sim = await startSimulator({ apiKey: KEY });
    expect((await ctl('POST', '/consents/grant', { userReference: 'erin', configKey: 'marketing-email', ttlMs: 60_000 })).status).toBe(200);
    expect((await check(sim.url, KEY, { userReference: 'erin', configKey: 'marketing-email' })).body.decision).toBe('ALLOW');
    expect((await ctl('POST', '/consents/expire', { userReference: 'erin', configKey: 'marketing-email' })).status).toBe(200);
    expect((await check(sim.url, KEY, { userReference: 'erin', configKey: 'marketing-email' })).body.decision).toBe('DENY');
    const published = await ctl('POST', '/flows/loyalty-program/versions', {
      consents: [{ consentId: 'con_marketing_email', scopes: [{ scopeId: 'scp_email', required: true, combinations: [{ requirement: 'c', use: 'u' }] }] }],
    });
    expect(published.status).toBe(201);
    expect(published.body.version).toBe(2);
    expect((await check(sim.url, KEY, { userReference: 'alice', configKey: 'loyalty-program' })).body.decision).toBe('ALLOW');
    const emitted = await ctl('POST', '/events', { type: 'data_subject_request.review_started', data: { customerId: 'cus_x' } });
    expect(emitted.status).toBe(201);
    expect(emitted.body).toMatchObject({ type: 'data_subject_request.review_started', data: { customerId: 'cus_x', status: 'in_review' } });
    expect((await ctl('PUT', '/faults', { status: 500, count: 1 })).status).toBe(200);
    expect((await check(sim.url, KEY, { userReference: 'alice', configKey: 'marketing-email' })).status).toBe(500);
    expect((await ctl('GET', '/state')).body.fault).toBeNull();
  });

  it.each([
    ['POST', '/consents/revoke', { userReference: 'erin', configKey: 'marketing-email' }, 409],
    ['POST', '/consents/deny', { userReference: 'alice', configKey: 'marketing-email' }, 409],
    ['POST', '/consents/grant', { userReference: 'zed', configKey: 'marketing-email' }, 404],
    ['POST', '/consents/grant', { userReference: 'alice' }, 400],
    ['POST', '/consents/grant', { userReference: 'alice', configKey: 'onboarding-bundle' }, 400],
    ['POST', '/events', { type: 'nope' }, 400],
    ['POST', '/flows/x/versions', { consents: 'no' }, 400],
    ['PUT', '/faults', { latencyMs: -1 }, 400],
    ['GET', '/nothing', undefined, 404],
  ])('%s %s %j → %i with a JSON error', async (method, path, body, status) => {
    sim = await startSimulator({ apiKey: KEY });
    const res = await ctl(method, path, body);
    expect(res.status).toBe(status);
    expect(typeof res.body.error).toBe('string');
  });

  it('records a denial as consent_action.created with action deny, without a REDEC obligation', async () => {
    sim = await startSimulator({ apiKey: KEY });
    const denied = await ctl('POST', '/consents/deny', { userReference: 'erin', configKey: 'credit-report' });
    expect(denied.status).toBe(200);
    expect(denied.body.events.map((e: any) => [e.type, e.data.action, e.data.userReference])).toEqual([
      ['consent_action.created', 'deny', 'erin'],
    ]);
    expect(sim.notificationRequirements().items).toEqual([]);
    expect((await check(sim.url, KEY, { userReference: 'erin', configKey: 'credit-report' })).body).toStrictEqual({
      decision: 'DENY',
      configKey: 'credit-report',
    });
  });

  it('requires the control token when one is set', async () => {
    sim = await startSimulator({ apiKey: KEY, controlToken: 'ctl-secret' });
    expect((await ctl('GET', '/state')).status).toBe(401);
    expect((await ctl('GET', '/state', undefined, { 'x-simulator-control-token': 'ctl-secret' })).status).toBe(200);
  });
});
