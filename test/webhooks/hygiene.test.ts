import { Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Secret } from '../../src/config/index.js';
import { createLogger, createRegistry } from '../../src/observability/index.js';
import {
  deliveryHeaders,
  envelope,
  post,
  RecordingRevocations,
  SECRET_A,
  SECRET_B,
  startApp,
  startWebhookListener,
  VECTOR_TS,
  webhookConfig,
  type FakeApp,
} from '../helpers/webhooks.js';

let app: FakeApp;
beforeEach(async () => {
  app = await startApp();
});
afterEach(async () => app.close());

/** A listener whose logs are captured and whose secrets can be swapped at run time. */
async function start(secrets: Secret<readonly string[]>, revocations = new RecordingRevocations()) {
  let logs = '';
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      logs += chunk.toString();
      done();
    },
  });
  const registry = createRegistry({ defaultMetrics: false });
  const listener = await startWebhookListener({
    config: { ...webhookConfig({ appUrl: app.url, requiredHeader: { name: 'x-tenant-auth', value: 'tenant-token-1' } }), secrets },
    logger: createLogger('debug', sink),
    registry,
    revocations,
    now: () => VECTOR_TS * 1000,
  });
  return { url: listener.url, registry, logs: () => logs, close: () => listener.close() };
}

const fixed = (value: readonly string[]): Secret<readonly string[]> & { value: readonly string[] } => {
  const s = { value, origin: 'test', current: () => s.value, watch: () => undefined, close: () => undefined };
  return s;
};

describe('hygiene', () => {
  it('logs carry neither secrets, signatures, the custom header value nor user references', async () => {
    const s = await start(fixed([SECRET_A]));
    try {
      const revoke = envelope({ id: 'evt_r', type: 'redec.notification.required', data: { notification_reason: 'revoke', customer_tenant_id: 'cust-secret-42' } });
      const good: Record<string, string> = { 'x-tenant-auth': 'tenant-token-1', ...deliveryHeaders(SECRET_A, VECTOR_TS, revoke, 'evt_r') };
      const forged: Record<string, string> = { 'x-tenant-auth': 'tenant-token-1', ...deliveryHeaders(SECRET_B, VECTOR_TS, revoke, 'evt_r') };
      expect((await post(s.url, revoke, forged)).status).toBe(401);
      expect((await post(s.url, revoke, { ...good, 'x-tenant-auth': 'wrong-value' })).status).toBe(401);
      expect((await post(s.url, revoke, good)).status).toBe(200);
      const logs = s.logs();
      expect(logs).toContain('webhook_rejected');
      expect(logs).toContain('webhook_accepted');
      for (const leak of [SECRET_A, SECRET_B, good['x-service-signature']!.slice(3), forged['x-service-signature']!.slice(3), 'tenant-token-1', 'wrong-value', 'cust-secret-42']) {
        expect(logs).not.toContain(leak);
      }
    } finally {
      await s.close();
    }
  });

  it('a rotated secret file takes effect without a restart (secrets are read per delivery)', async () => {
    const secrets = fixed([SECRET_A]);
    const s = await start(secrets);
    try {
      const body = envelope({ id: 'evt_rot' });
      const signedB = { 'x-tenant-auth': 'tenant-token-1', ...deliveryHeaders(SECRET_B, VECTOR_TS, body) };
      expect((await post(s.url, body, signedB)).status).toBe(401);
      secrets.value = [SECRET_A, SECRET_B];
      expect((await post(s.url, body, signedB)).status).toBe(200);
    } finally {
      await s.close();
    }
  });

  it('a failing revocation hook → 503 (the service retries), nothing forwarded, the process lives', async () => {
    const broken = new RecordingRevocations();
    broken.revokeAll = () => {
      throw new Error('cache exploded');
    };
    const s = await start(fixed([SECRET_A]), broken);
    try {
      const body = envelope({ id: 'evt_boom', type: 'consent_action.created' });
      const reply = await post(s.url, body, { 'x-tenant-auth': 'tenant-token-1', ...deliveryHeaders(SECRET_A, VECTOR_TS, body) });
      expect(reply.status).toBe(503);
      expect(app.received).toHaveLength(0);
    } finally {
      await s.close();
    }
  });

  it('every metric family the contract and the issue name is exposed', async () => {
    const s = await start(fixed([SECRET_A]));
    try {
      const text = await s.registry.metrics();
      for (const name of [
        'consent_sidecar_webhook_deliveries_total',
        'consent_sidecar_webhook_rejections_total',
        'consent_sidecar_webhook_forward_duration_seconds',
        'consent_sidecar_webhook_timestamp_skew_seconds',
        'consent_sidecar_webhook_in_flight',
        'consent_sidecar_webhook_highest_sequence',
        'consent_sidecar_webhook_out_of_order_total',
        'consent_sidecar_webhook_secret_matches_total',
      ]) {
        expect(text).toContain(`# TYPE ${name} `);
      }
    } finally {
      await s.close();
    }
  });
});
