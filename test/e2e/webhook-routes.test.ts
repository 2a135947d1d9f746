import { afterEach, describe, expect, it } from 'vitest';
import { getTestRedis, type TestRedis } from '../helpers/redis.js';
import { startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { PATIENTLY } from '../helpers/wait.js';
import { deliver, RecordingApp, replicaFlags, ServeProcess, signedEvent } from '../helpers/serve-process.js';

/**
 * Routes by event type (`--app-webhook-route 'GLOB=URL'`, repeatable, first match wins), on a real
 * `serve` in both delivery modes: two event types reach two apps, an unrouted type is never
 * acknowledged and forgotten (passthrough: 503 `unrouted`; queue: stored, and left waiting for a
 * replica that routes it), an ignored type is answered 200 `ignored`, and dedup stays per event id.
 * (The rolling update, two replicas that route differently: test/e2e/rolling-routes.test.ts.)
 */
let upstream: ScriptedUpstream | undefined;
let redis: TestRedis | undefined;
const serves: ServeProcess[] = [];
const apps: RecordingApp[] = [];

afterEach(async () => {
  await Promise.allSettled(serves.splice(0).map((s) => s.stop()));
  await Promise.allSettled(apps.splice(0).map((a) => a.down()));
  await upstream?.close();
  await redis?.stop();
  upstream = redis = undefined;
});

async function app(): Promise<RecordingApp> {
  const a = new RecordingApp();
  await a.up();
  apps.push(a);
  return a;
}

describe.each(['passthrough', 'queue'] as const)('routes by event type, %s mode', (mode) => {
  it('DSR events to one app, REDEC notices to another, the rest unrouted (no default): each where its route says, once', async () => {
    upstream = await startUpstream({ body: {} });
    const dsr = await app();
    const redec = await app();
    const queue: Record<string, string> = mode === 'queue' ? { 'webhook-delivery': 'queue', 'redis-url': (redis = await getTestRedis()).url } : {};
    const flags = replicaFlags({ upstreamUrl: upstream.url, apiKey: 'k', appUrl: '', prefix: `routes-${mode}:`, extra: { 'redec-reconcile-interval-ms': '0', ...queue } });
    delete flags['app-webhook-url'];
    // Repeated through the variable, one route per line, as a chart's env would carry them.
    const serve = new ServeProcess(flags, {
      CONSENT_SIDECAR_APP_WEBHOOK_ROUTE: `data_subject_request.*=${dsr.url}\nredec.notification.required=${redec.url}`,
      CONSENT_SIDECAR_APP_WEBHOOK_IGNORE: 'redec.access.cancelled',
    });
    serves.push(serve);
    await serve.start();

    const created = signedEvent('evt_dsr_1', 1, 'data_subject_request.created');
    const notice = signedEvent('evt_redec_1', 2, 'redec.notification.required');
    const other = signedEvent('evt_other_1', 3, 'redec.access.occurred');
    const ignored = signedEvent('evt_ignored_1', 4, 'redec.access.cancelled');
    expect((await deliver(serve, created)).status).toBe(200);
    expect((await deliver(serve, notice)).status).toBe(200);
    // This assertion was `200 unrouted` in both modes: an event acknowledged and forwarded nowhere,
    // which a fleet in a rollout lost. Passthrough refuses it (the service retries); queue mode keeps it.
    expect(await deliver(serve, other)).toEqual(mode === 'passthrough' ? { status: 503, body: { error: 'unrouted' } } : { status: 200, body: { status: 'queued' } });
    expect(await deliver(serve, ignored)).toEqual({ status: 200, body: { status: 'ignored' } });
    // A copy of a routed event is a duplicate, whatever its route.
    expect((await deliver(serve, created)).body).toEqual({ status: 'duplicate' });

    await expect.poll(() => [dsr.count('evt_dsr_1'), redec.count('evt_redec_1')], PATIENTLY).toEqual([1, 1]);
    expect(dsr.received.map((r) => r.id)).toEqual(['evt_dsr_1']);
    expect(redec.received.map((r) => r.id)).toEqual(['evt_redec_1']);
    if (mode === 'passthrough') {
      expect(await serve.metric('consent_sidecar_webhook_deliveries_total', { outcome: 'unrouted' })).toBe(1);
    } else {
      // No replica routes it: it waits in the queue, no attempt spent, for one that does.
      await expect.poll(() => serve.metric('consent_sidecar_webhook_queue_forwards_total', { outcome: 'awaiting_route' }), PATIENTLY).toBeGreaterThanOrEqual(1);
      // The two routed events delivered, the unrouted one still waits (the gauge is read every second).
      await expect.poll(() => serve.metric('consent_sidecar_webhook_queue_depth'), PATIENTLY).toBe(1);
    }
    expect(await serve.metric('consent_sidecar_webhook_deliveries_total', { outcome: 'ignored' })).toBe(1);
    await expect.poll(() => serve.metric('consent_sidecar_webhook_route_forwards_total', { route: 'data_subject_request.*', outcome: 'accepted' }), PATIENTLY).toBe(1);
    expect(await serve.metric('consent_sidecar_webhook_route_forwards_total', { route: 'redec.notification.required', outcome: 'accepted' })).toBe(1);
  }, 60_000);

  it('with --app-webhook-url as the default, first match wins and the rest go to the default', async () => {
    upstream = await startUpstream({ body: {} });
    const narrow = await app();
    const wide = await app();
    const fallback = await app();
    const queue: Record<string, string> = mode === 'queue' ? { 'webhook-delivery': 'queue', 'redis-url': (redis = await getTestRedis()).url } : {};
    const flags = replicaFlags({ upstreamUrl: upstream.url, apiKey: 'k', appUrl: fallback.url, prefix: `routes-default-${mode}:`, extra: { 'redec-reconcile-interval-ms': '0', ...queue } });
    const serve = new ServeProcess(flags, { CONSENT_SIDECAR_APP_WEBHOOK_ROUTE: `data_subject_request.created=${narrow.url}\ndata_subject_request.*=${wide.url}` });
    serves.push(serve);
    await serve.start();
    for (const [i, type] of ['data_subject_request.created', 'data_subject_request.resolved', 'consent_action.created'].entries()) {
      expect((await deliver(serve, signedEvent(`evt_${i}`, i + 1, type))).status).toBe(200);
    }
    await expect.poll(() => [narrow.count('evt_0'), wide.count('evt_1'), fallback.count('evt_2')], PATIENTLY).toEqual([1, 1, 1]);
    expect([narrow.received.length, wide.received.length, fallback.received.length]).toEqual([1, 1, 1]);
    expect(await serve.metric('consent_sidecar_webhook_route_forwards_total', { route: 'default', outcome: 'accepted' })).toBe(1);
  }, 60_000);
});
