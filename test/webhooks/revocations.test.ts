import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Revocation } from '../../src/lib/revocation-hook.js';
import {
  deliveryHeaders,
  envelope,
  loadVectors,
  metricValue,
  post,
  RecordingRevocations,
  SECRET_A,
  startApp,
  startSidecar,
  VECTOR_TS,
  type FakeApp,
  type SidecarUnderTest,
} from '../helpers/webhooks.js';

let app: FakeApp;
let sidecar: SidecarUnderTest;

beforeEach(async () => {
  app = await startApp();
  sidecar = await startSidecar({ appUrl: app.url, now: () => VECTOR_TS * 1000 });
});
afterEach(async () => {
  await sidecar.close();
  await app.close();
});

const send = (body: Buffer) => post(sidecar.url, body, deliveryHeaders(SECRET_A, VECTOR_TS, body));

describe('revocations reach the decision cache', () => {
  it('redec revoke (openssl fixture) purges its customer, even when the app fails', async () => {
    app.behaviour = { status: 500 };
    const v = loadVectors().find((x) => x.file === 'revoke.json' && x.secret === SECRET_A)!;
    const reply = await post(sidecar.url, v.body, { 'x-service-timestamp': String(v.timestamp), 'x-service-signature': `v1=${v.hex}` });
    expect(reply.status).toBe(503);
    expect(sidecar.revocations.calls).toEqual(['user:cust-42']);
    expect(await metricValue(sidecar.registry, 'consent_sidecar_webhook_revocations_total', { scope: 'user' })).toBe(1);
  });

  it.each([
    ['redec grant', { type: 'redec.notification.required', data: { notification_reason: 'grant', customer_tenant_id: 'c1' } }, []],
    ['redec revoke', { type: 'redec.notification.required', data: { notification_reason: 'revoke', customer_tenant_id: 'c1' } }, ['user:c1']],
    ['redec revoke, no customer', { type: 'redec.notification.required', data: { notification_reason: 'revoke' } }, ['all']],
    ['redec revoke, empty customer', { type: 'redec.notification.required', data: { notification_reason: 'revoke', customer_tenant_id: '' } }, ['all']],
    ['redec revoke, numeric customer', { type: 'redec.notification.required', data: { notification_reason: 'revoke', customer_tenant_id: 7 } }, ['all']],
    ['consent action naming its customer', { type: 'consent_action.created', data: { userReference: 'u-9' } }, ['user:u-9']],
    ['consent action without a customer', { type: 'consent_action.created', data: { action: 'revoke' } }, ['all']],
    ['other types', { type: 'redec.access.occurred', data: { customer_tenant_id: 'c1' } }, []],
  ])('%s → %j', async (_name, fields, calls) => {
    expect((await send(envelope({ id: `evt_${Math.random()}`, ...fields }))).status).toBe(200);
    expect(sidecar.revocations.calls).toEqual(calls);
  });

  it('an invalid envelope purges nothing', async () => {
    const body = Buffer.from(JSON.stringify({ type: 'consent_action.created', data: {} }));
    expect((await send(body)).status).toBe(400);
    expect(sidecar.revocations.calls).toEqual([]);
  });
});

/** The publisher of several replicas: purges here, then shares; `failing` makes sharing reject (Redis away). */
class SharingRevocations extends RecordingRevocations {
  readonly shared: Revocation[] = [];
  failing = false;
  override publish(revocation: Revocation): Promise<void> {
    void super.publish(revocation);
    if (this.failing) return Promise.reject(new Error('Redis away'));
    this.shared.push(revocation);
    return Promise.resolve();
  }
}

describe('revocations shared with other replicas', () => {
  let hook: SharingRevocations;
  let shared: SidecarUnderTest;
  beforeEach(async () => {
    hook = new SharingRevocations();
    shared = await startSidecar({ appUrl: app.url, now: () => VECTOR_TS * 1000, revocations: hook });
  });
  afterEach(async () => {
    await shared.close();
  });
  const sendShared = (body: Buffer) => post(shared.url, body, deliveryHeaders(SECRET_A, VECTOR_TS, body));

  it('shares what it purged here: one customer, or everybody', async () => {
    expect((await sendShared(envelope({ id: 'evt_s1', type: 'consent_action.created', data: { userReference: 'u-1' } }))).status).toBe(200);
    expect((await sendShared(envelope({ id: 'evt_s2', type: 'consent_action.created', data: {} }))).status).toBe(200);
    expect((await sendShared(envelope({ id: 'evt_s3', type: 'redec.access.occurred', data: {} }))).status).toBe(200);
    expect(hook.calls).toEqual(['user:u-1', 'all']);
    expect(hook.shared).toEqual([{ scope: 'user', userReference: 'u-1' }, { scope: 'all' }]);
  });

  it('a revocation that cannot be shared is purged here and forwarded, but answered 503 revocation_not_shared; the retry shares it and is a duplicate', async () => {
    hook.failing = true;
    const body = envelope({ id: 'evt_unshared', type: 'consent_action.created', data: { userReference: 'u-2' } });
    const first = await sendShared(body);
    expect(first).toMatchObject({ status: 503 });
    expect(JSON.parse(first.body)).toEqual({ error: 'revocation_not_shared' });
    expect(hook.calls).toEqual(['user:u-2']);
    expect(app.received.map((r) => JSON.parse(r.body.toString()).id)).toEqual(['evt_unshared']);

    hook.failing = false;
    const retry = await sendShared(body);
    expect(retry.status).toBe(200);
    expect(JSON.parse(retry.body)).toEqual({ status: 'duplicate' });
    expect(hook.shared).toEqual([{ scope: 'user', userReference: 'u-2' }]);
    expect(app.received).toHaveLength(1);
  });
});
