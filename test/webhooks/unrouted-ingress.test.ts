import { afterEach, describe, expect, it } from 'vitest';
import { createRegistry } from '../../src/observability/registry.js';
import { deliveryHeaders, envelope, metricValue, nowS, post, RecordingRevocations, SECRET_A, startApp, startWebhookListener, webhookConfig, type FakeApp } from '../helpers/webhooks.js';

/**
 * Passthrough on the real listener, with a replica whose routes do not take every type (contract,
 * Webhooks): an event no route takes and no default exists for is never acknowledged (503
 * `unrouted`, so the service retries and may reach a replica that routes it); a type an
 * `--app-webhook-ignore` glob names is acknowledged (200 `ignored`), counted, never forwarded.
 */
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.allSettled(closers.splice(0).map((c) => c()));
});

async function replica(o: { routes: { glob: string; url: string }[]; appUrl?: string; ignore?: string[] }): Promise<{ url: string; registry: ReturnType<typeof createRegistry>; revocations: RecordingRevocations }> {
  const registry = createRegistry({ defaultMetrics: false });
  const revocations = new RecordingRevocations();
  const listener = await startWebhookListener({ config: webhookConfig({ appUrl: o.appUrl ?? null, routes: o.routes, ignore: o.ignore ?? [] }), registry, revocations });
  closers.push(() => listener.close());
  return { url: listener.url, registry, revocations };
}

async function app(): Promise<FakeApp> {
  const a = await startApp();
  closers.push(() => a.close());
  return a;
}

const deliver = (url: string, id: string, type: string, data: Record<string, unknown> = {}) => {
  const body = envelope({ id, type, data });
  return post(url, body, deliveryHeaders(SECRET_A, nowS(), body, id));
};

describe('passthrough: an event this replica does not route', () => {
  it('is answered 503 unrouted, counted, forwarded nowhere, and left unclaimed: the retry to a replica that routes it is accepted', async () => {
    const target = await app();
    const old = await replica({ routes: [{ glob: 'consent_action.*', url: target.url }] });
    const updated = await replica({ routes: [{ glob: 'consent_action.*', url: target.url }, { glob: 'newtype.*', url: target.url }] });

    expect(await deliver(old.url, 'evt_new_1', 'newtype.created')).toEqual({ status: 503, body: '{"error":"unrouted"}' });
    expect(await metricValue(old.registry, 'consent_sidecar_webhook_deliveries_total', { outcome: 'unrouted' })).toBe(1);
    expect(await metricValue(old.registry, 'consent_sidecar_webhook_deliveries_total', { outcome: 'accepted' })).toBe(0);
    expect(target.received).toHaveLength(0);
    // Asked again, the same replica answers the same: nothing was remembered of it.
    expect((await deliver(old.url, 'evt_new_1', 'newtype.created')).status).toBe(503);
    // The service's retry that lands on the updated replica reaches the app.
    expect(await deliver(updated.url, 'evt_new_1', 'newtype.created')).toEqual({ status: 200, body: '{"status":"accepted"}' });
    expect(target.received.map((r) => (JSON.parse(r.body.toString()) as { id: string }).id)).toEqual(['evt_new_1']);
    // Routed types still pass through the old replica.
    expect((await deliver(old.url, 'evt_old_1', 'consent_action.created', { userReference: 'u1' })).status).toBe(200);
    expect(target.received).toHaveLength(2);
  });

  it('a revocation it cannot route still purges before the 503', async () => {
    const target = await app();
    const old = await replica({ routes: [{ glob: 'data_subject_request.*', url: target.url }] });
    expect((await deliver(old.url, 'evt_rev_1', 'consent_action.created', { userReference: 'alice' })).status).toBe(503);
    expect(old.revocations.calls).toEqual(['user:alice']);
  });
});

describe('--app-webhook-ignore', () => {
  it('a type it names is answered 200 ignored, counted, not forwarded, in front of the default; a route that matches comes first', async () => {
    const fallback = await app();
    const dsr = await app();
    const r = await replica({ appUrl: fallback.url, routes: [{ glob: 'redec.access.failed', url: dsr.url }], ignore: ['redec.access.*'] });
    expect(await deliver(r.url, 'evt_ign_1', 'redec.access.occurred')).toEqual({ status: 200, body: '{"status":"ignored"}' });
    // A copy is ignored again (an ignored event is not deduplicated: nothing was accepted).
    expect(await deliver(r.url, 'evt_ign_1', 'redec.access.occurred')).toEqual({ status: 200, body: '{"status":"ignored"}' });
    expect(await deliver(r.url, 'evt_ign_2', 'redec.access.failed')).toEqual({ status: 200, body: '{"status":"accepted"}' });
    expect(await deliver(r.url, 'evt_ign_3', 'consent_action.created')).toEqual({ status: 200, body: '{"status":"accepted"}' });
    expect(fallback.received).toHaveLength(1);
    expect(dsr.received).toHaveLength(1);
    expect(await metricValue(r.registry, 'consent_sidecar_webhook_deliveries_total', { outcome: 'ignored' })).toBe(2);
    expect(await metricValue(r.registry, 'consent_sidecar_webhook_deliveries_total', { outcome: 'accepted' })).toBe(2);
  });

  it('without a default: a type an ignore names is 200 ignored, any other type no route takes is 503 unrouted', async () => {
    const target = await app();
    const r = await replica({ routes: [{ glob: 'consent_action.*', url: target.url }], ignore: ['redec.*'] });
    expect((await deliver(r.url, 'evt_i1', 'redec.access.cancelled')).body).toBe('{"status":"ignored"}');
    expect((await deliver(r.url, 'evt_i2', 'data_subject_request.created')).body).toBe('{"error":"unrouted"}');
    expect(target.received).toHaveLength(0);
  });
});
