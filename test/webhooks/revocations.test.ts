import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { deliveryHeaders, envelope, loadVectors, metricValue, post, SECRET_A, startApp, startSidecar, VECTOR_TS, type FakeApp, type SidecarUnderTest } from './helpers.js';

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
