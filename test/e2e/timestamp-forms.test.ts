import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getTestRedis, type TestRedis } from '../helpers/redis.js';
import { startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { PATIENTLY } from '../helpers/wait.js';
import { sign } from '../helpers/webhooks.js';
import { RecordingApp, replicaFlags, SECRET, ServeProcess } from '../helpers/serve-process.js';

/**
 * One timestamp rule for the ingress and the queue's re-verification (contract, Webhooks): each form
 * the ingress accepts is delivered in both modes, each form it refuses is 401 in both. A queue that
 * refused at forward time what the ingress accepted would acknowledge an event and never deliver it.
 */
const ACCEPTED = (s: number): string[] => [`${s}`, `${s}.0`, `${s}.25`];
const REFUSED = (s: number): string[] => [`+${s}`, ` ${s}`, `${s} `, `${s}e0`, `0x${s.toString(16)}`, `${s}.`, `${s / 1e9}e9`, '-1', 'Infinity', `${s},0`];

let upstream: ScriptedUpstream;
let redis: TestRedis;
beforeAll(async () => {
  upstream = await startUpstream({ body: {} });
  redis = await getTestRedis();
});
afterAll(async () => {
  await upstream?.close();
  await redis?.stop();
});

describe.each(['passthrough', 'queue'] as const)('timestamp forms, %s mode', (mode) => {
  const app = new RecordingApp();
  let serve: ServeProcess;
  beforeAll(async () => {
    await app.up();
    const extra: Record<string, string> = { 'redec-reconcile-interval-ms': '0', ...(mode === 'queue' ? { 'webhook-delivery': 'queue' } : {}) };
    serve = new ServeProcess(replicaFlags({ upstreamUrl: upstream.url, apiKey: 'k', appUrl: app.url, redisUrl: redis.url, prefix: redis.prefix(), extra }));
    await serve.start();
  }, 60_000);
  afterAll(async () => {
    await serve?.stop();
    await app.down();
  });

  async function post(id: string, timestamp: string): Promise<number> {
    const body = JSON.stringify({ id, sequence: 1, type: 'test.event', occurredAt: Date.now(), data: {} });
    const res = await fetch(`${serve.urls.webhook}/webhooks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-service-event-id': id, 'x-service-timestamp': timestamp, 'x-service-signature': sign(SECRET, timestamp, body) },
      body,
    });
    await res.arrayBuffer();
    return res.status;
  }

  it('every accepted form reaches the app once', async () => {
    const now = Math.floor(Date.now() / 1000);
    const forms = ACCEPTED(now);
    for (const [i, ts] of forms.entries()) expect([ts, await post(`evt_ts_${mode}_${i}`, ts)]).toEqual([ts, 200]);
    await expect.poll(() => forms.map((_, i) => app.accepted(`evt_ts_${mode}_${i}`)), PATIENTLY).toEqual(forms.map(() => 1));
    expect(await serve.metric('consent_sidecar_webhook_queue_forwards_total', { outcome: 'signature_mismatch' }).catch(() => 0)).toBe(0);
  });

  it('every refused form is 401 before any 200', async () => {
    const now = Math.floor(Date.now() / 1000);
    for (const [i, ts] of REFUSED(now).entries()) expect([ts, await post(`evt_ts_bad_${mode}_${i}`, ts)]).toEqual([ts, 401]);
    expect(app.received.filter((r) => r.id.startsWith('evt_ts_bad_'))).toEqual([]);
  });
});
