import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOtlpReceiver, type OtlpReceiver } from '../helpers/otlp.js';
import { startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { until } from '../helpers/wait.js';
import { deliver, RecordingApp, ServeProcess, signedEvent } from '../helpers/serve-process.js';
import { ask, check, flagsFor, forwardAuth, hex, lastAt, service, traceparentOf } from './traced.js';

/**
 * Trace context with spans off (the default), end to end: the app's `traceparent` reaches the
 * service as it came on every route that calls it, a malformed one is dropped, none is invented,
 * and nothing is exported. And a collector that is not there costs only the spans.
 */

const MALFORMED = [
  ['an all-zero trace id', `00-${'0'.repeat(32)}-${hex(8)}-01`],
  ['version ff', `ff-${hex(16)}-${hex(8)}-01`],
  ['version 00 with a fifth field', `00-${hex(16)}-${hex(8)}-01-extra`],
  ['garbage', 'garbage'],
] as const;

describe('tracing off (no OTLP endpoint): nothing exported, the app\'s traceparent reaches the service as it came', () => {
  let upstream: ScriptedUpstream;
  let otlp: OtlpReceiver;
  const app = new RecordingApp();
  let serve: ServeProcess;

  beforeAll(async () => {
    upstream = await startUpstream(service);
    otlp = await startOtlpReceiver();
    await app.up();
    // The receiver is up but not configured: OTEL_SERVICE_NAME and a sampler alone turn nothing on.
    serve = new ServeProcess(flagsFor(upstream, app), { OTEL_SERVICE_NAME: 'shop-consent', OTEL_TRACES_SAMPLER: 'always_on' });
    await serve.start();
  }, 60_000);

  afterAll(async () => {
    await serve?.stop();
    await app.down();
    await otlp?.close();
    await upstream?.close();
  });

  // Each route that calls the service, and where the service sees that call.
  const routes = [
    ['check', (tc: string[], n: string) => check(serve, `u-off-${n}`, 'marketing-email', tc), '/v1/authorization/check'],
    ['forward-auth', (tc: string[], n: string) => forwardAuth(serve, `u-off-fa-${n}`, 'marketing-email', tc), '/v1/authorization/check'],
    ['passthrough', (tc: string[], n: string) => ask(serve, 'GET', `/v1/consents/${n}`, tc), '/v1/consents/'],
  ] as const;

  it.each(routes)('%s: a valid traceparent and tracestate pass unchanged; a malformed, repeated or absent one reaches nobody', async (_route, send, seenAt) => {
    const tp = traceparentOf(hex(16), hex(8));
    expect((await send(['traceparent', tp, 'tracestate', 'shop=2'], hex(4))).status).toBe(200);
    expect(lastAt(upstream, seenAt).headers).toMatchObject({ traceparent: tp, tracestate: 'shop=2' });
    // an unsampled one passes too: the app decided, not us
    const unsampled = traceparentOf(hex(16), hex(8), '00');
    await send(['traceparent', unsampled], hex(4));
    expect(lastAt(upstream, seenAt).headers.traceparent).toBe(unsampled);

    const dropped = [...MALFORMED, ['given twice', tp] as const];
    for (const [what, bad] of dropped) {
      const before = upstream.count;
      const headers = what === 'given twice' ? ['traceparent', bad, 'traceparent', bad, 'tracestate', 'shop=3'] : ['traceparent', bad, 'tracestate', 'shop=3'];
      expect((await send(headers, hex(4))).status, what).toBe(200);
      expect(upstream.count).toBe(before + 1);
      expect(lastAt(upstream, seenAt).headers.traceparent, what).toBeUndefined();
      expect(lastAt(upstream, seenAt).headers.tracestate, what).toBeUndefined();
    }
    // none from the app: none invented
    await send([], hex(4));
    expect(lastAt(upstream, seenAt).headers.traceparent).toBeUndefined();
  });

  it('several tracestate fields reach the service as one list', async () => {
    const tp = traceparentOf(hex(16), hex(8));
    await check(serve, 'u-off-list', 'marketing-email', ['tracestate', 'a=1', 'traceparent', tp, 'tracestate', 'b=2']);
    expect(lastAt(upstream, '/v1/authorization/check').headers).toMatchObject({ traceparent: tp, tracestate: 'a=1,b=2' });
  });

  it('a webhook goes through as before, and nothing was ever sent to the receiver', async () => {
    expect((await deliver(serve, signedEvent('evt_off_1', 1))).status).toBe(200);
    expect(app.count('evt_off_1')).toBe(1);
    expect(await serve.metric('consent_sidecar_decisions_total', { source: 'upstream' })).toBeGreaterThanOrEqual(6);
    expect(serve.logs().some((l) => l.event === 'tracing_on')).toBe(false);
    expect(otlp.posts).toBe(0);
  });
});

describe('a collector that is not there costs only dropped spans', () => {
  it('decisions and webhooks answer as before, one log line says so, and serve still stops (the flush waits at most 1 s)', async () => {
    const upstream = await startUpstream(service);
    const app = new RecordingApp();
    await app.up();
    // A port nothing listens on (the receiver was started and closed).
    const gone = await startOtlpReceiver();
    await gone.close();
    const serve = new ServeProcess(flagsFor(upstream, app), { OTEL_EXPORTER_OTLP_ENDPOINT: gone.url, OTEL_BSP_SCHEDULE_DELAY: '20', OTEL_EXPORTER_OTLP_TIMEOUT: '1000' });
    await serve.start();
    try {
      for (let i = 0; i < 20; i++) expect((await check(serve, `u-dead-${i}`, 'marketing-email', ['traceparent', traceparentOf(hex(16), hex(8))])).status).toBe(200);
      expect((await deliver(serve, signedEvent('evt_dead_collector', 1))).status).toBe(200);
      expect(serve.running).toBe(true);
      // ...and the operator is told, once, not per batch
      await until(() => serve.logs().some((l) => l.event === 'tracing_export_problem'), 'a log line about the dead collector');
      expect(serve.logs().filter((l) => l.event === 'tracing_export_problem')).toHaveLength(1);
    } finally {
      await serve.stop();
      await app.down();
      await upstream.close();
    }
  }, 60_000);
});
