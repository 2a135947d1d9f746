import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getTestRedis, type TestRedis } from '../helpers/redis.js';
import { INTERNAL, SERVER, startOtlpReceiver, type OtlpReceiver, type OtlpSpan } from '../helpers/otlp.js';
import { startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { PATIENTLY } from '../helpers/wait.js';
import { RecordingApp, ServeProcess, signedEvent } from '../helpers/serve-process.js';
import { flagsFor, hex, service, traceparentOf } from './traced.js';

/**
 * Queue mode with spans on: the delivery's span ends at the enqueue (the 200 goes back once Redis
 * holds the event), and each forward a worker makes later is a root span of its own with what
 * became of the entry. A real serve, a real Redis, a real OTLP/HTTP receiver.
 */
describe('queue mode, spans on', () => {
  let redis: TestRedis;
  let upstream: ScriptedUpstream;
  let otlp: OtlpReceiver;
  const app = new RecordingApp();
  let serve: ServeProcess;

  beforeAll(async () => {
    redis = await getTestRedis();
    upstream = await startUpstream(service);
    otlp = await startOtlpReceiver();
    await app.up();
    const flags = flagsFor(upstream, app, { 'webhook-delivery': 'queue', 'redis-url': redis.url, 'redis-key-prefix': redis.prefix() });
    serve = new ServeProcess(flags, { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_BSP_SCHEDULE_DELAY: '50' });
    await serve.start();
  }, 60_000);

  afterAll(async () => {
    await serve?.stop();
    await app.down();
    await otlp?.close();
    await upstream?.close();
    await redis?.stop();
  });

  it('verify and enqueue in a root span linked to the sender\'s, then the worker\'s forward as a root span, delivered', async () => {
    const event = signedEvent('evt_traced_queue', 1);
    const [traceId, senderSpan] = [hex(16), hex(8)];
    const res = await fetch(`${serve.urls.webhook}/webhooks`, { method: 'POST', headers: { ...event.headers, traceparent: traceparentOf(traceId, senderSpan) }, body: event.body });
    expect(res.status).toBe(200);
    // A root of the sidecar's own, linked to the sender's span once verified (never its child).
    const linked = (): OtlpSpan | undefined => otlp.spans.find((s) => s.kind === SERVER && s.links.some((l) => l.traceId === traceId && l.spanId === senderSpan));
    await expect.poll(() => linked() && otlp.trace(linked()!.traceId).length, PATIENTLY).toBe(3);
    const root = linked()!;
    expect(root).toMatchObject({ name: 'POST /webhooks', parentSpanId: undefined, attributes: { 'http.response.status_code': 200 } });
    expect(otlp.trace(root.traceId).filter((s) => s.parentSpanId === root.spanId).map((s) => s.name).sort()).toEqual(['consent.webhook.enqueue', 'consent.webhook.verify']);
    expect(otlp.trace(traceId)).toEqual([]);

    await expect.poll(() => app.count('evt_traced_queue'), PATIENTLY).toBe(1);
    await expect.poll(() => otlp.spans.filter((s) => s.name === 'consent.webhook.queue.forward').length, PATIENTLY).toBe(1);
    const forward = otlp.spans.find((s) => s.name === 'consent.webhook.queue.forward')!;
    expect(forward).toMatchObject({ kind: INTERNAL, parentSpanId: undefined, attributes: { 'consent.outcome': 'delivered' } });
    expect(otlp.errors).toEqual([]);
  });
});
