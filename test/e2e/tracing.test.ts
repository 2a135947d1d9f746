import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLIENT, INTERNAL, SERVER, startOtlpReceiver, type OtlpReceiver, type OtlpSpan } from '../helpers/otlp.js';
import { allow, startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { PATIENTLY, until } from '../helpers/wait.js';
import { RecordingApp, ServeProcess, signedEvent } from '../helpers/serve-process.js';
import { ask, check, flagsFor, forwardAuth, hex, lastAt, service, traceparentOf } from './traced.js';

/**
 * Trace context and OpenTelemetry (CONTRACT, Decision API, "Trace context"), spans on, end to end:
 * a real `serve` with OTEL_EXPORTER_OTLP_ENDPOINT, a scriptable service that records the headers it
 * gets, a recording app, and a real OTLP/HTTP receiver decoding what the exporter sends (OTLP/JSON).
 * Spans off and a collector that is not there: tracing-off.test.ts.
 */

describe('OpenTelemetry spans on (OTEL_EXPORTER_OTLP_ENDPOINT)', () => {
  let upstream: ScriptedUpstream;
  let otlp: OtlpReceiver;
  const app = new RecordingApp();
  let serve: ServeProcess;

  beforeAll(async () => {
    upstream = await startUpstream(service);
    otlp = await startOtlpReceiver();
    await app.up();
    serve = new ServeProcess(flagsFor(upstream, app), { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_BSP_SCHEDULE_DELAY: '50', OTEL_SERVICE_NAME: 'shop-consent', OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=test' });
    await serve.start();
  }, 60_000);

  afterAll(async () => {
    await serve?.stop();
    await app.down();
    await otlp?.close();
    await upstream?.close();
    expect(otlp.errors).toEqual([]);
  });

  it('a miss: the app\'s trace id is the one the service sees and the one on the spans; the service\'s parent is the sidecar\'s client span, a child of its server span', async () => {
    const [traceId, appSpan] = [hex(16), hex(8)];
    expect(await check(serve, 'secret-user-ref-1', 'marketing-email', ['traceparent', traceparentOf(traceId, appSpan), 'tracestate', 'shop=1'])).toStrictEqual({ status: 200, source: 'upstream' });
    const seen = lastAt(upstream, '/v1/authorization/check').headers;
    const [, seenTrace, seenParent] = String(seen.traceparent).split('-');
    expect(seenTrace).toBe(traceId);
    expect(seen.tracestate).toBe('shop=1');

    await expect.poll(() => otlp.trace(traceId).length, PATIENTLY).toBe(2);
    const server = otlp.trace(traceId).find((s) => s.kind === SERVER)!;
    const client = otlp.trace(traceId).find((s) => s.kind === CLIENT)!;
    expect(server).toMatchObject({
      name: 'POST /v1/authorization/check',
      parentSpanId: appSpan,
      attributes: { 'http.route': '/v1/authorization/check', 'consent.route': 'check', 'consent.decision': 'allow', 'consent.decision.source': 'upstream', 'consent.config_key': 'marketing-email', 'http.response.status_code': 200 },
      resource: { 'service.name': 'shop-consent', 'deployment.environment.name': 'test' },
    });
    expect(client).toMatchObject({ name: 'POST', parentSpanId: server.spanId, attributes: { 'http.request.method': 'POST', 'server.address': '127.0.0.1', 'consent.upstream.outcome': 'ok' } });
    expect(seenParent).toBe(client.spanId);
    // never the user reference, in any span
    expect(JSON.stringify(otlp.spans)).not.toContain('secret-user-ref');
  });

  it('a hit exports one span and calls nothing', async () => {
    const calls = upstream.count;
    const traceId = hex(16);
    expect(await check(serve, 'secret-user-ref-1', 'marketing-email', ['traceparent', traceparentOf(traceId, hex(8))])).toStrictEqual({ status: 200, source: 'cache' });
    await expect.poll(() => otlp.trace(traceId).length, PATIENTLY).toBe(1);
    expect(otlp.trace(traceId)[0]).toMatchObject({ kind: SERVER, attributes: { 'consent.decision.source': 'cache', 'consent.decision': 'allow' } });
    // A call would have come before the answer: none did.
    expect(upstream.count).toBe(calls);
  });

  it('coalesced misses: one call to the service, and the request that joined it links to that call', async () => {
    // The service holds its answer until both requests are in: the second joins the first's call.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    upstream.enqueue((req) => ({ body: allow(JSON.parse(req.body).configKey, Date.now() + 60_000), hold: held }));
    const [a, b] = [hex(16), hex(16)];
    const calls = upstream.checks;
    const coalesced = await serve.metric('consent_sidecar_upstream_coalesced_total');
    const first = check(serve, 'secret-user-ref-2', 'marketing-email', ['traceparent', traceparentOf(a, hex(8))]);
    await until(() => upstream.checks === calls + 1, 'the first miss reached the service');
    const second = check(serve, 'secret-user-ref-2', 'marketing-email', ['traceparent', traceparentOf(b, hex(8))]);
    await expect.poll(() => serve.metric('consent_sidecar_upstream_coalesced_total'), PATIENTLY).toBe(coalesced + 1);
    release();
    expect((await first).source).toBe('upstream');
    expect((await second).source).toBe('upstream');
    expect(upstream.checks).toBe(calls + 1);
    await expect.poll(() => otlp.trace(b).length, PATIENTLY).toBe(1);
    await expect.poll(() => otlp.trace(a).filter((s) => s.kind === CLIENT).length, PATIENTLY).toBe(1);
    const call = otlp.trace(a).find((s) => s.kind === CLIENT)!;
    expect(otlp.trace(b)[0]!.links).toEqual([{ traceId: a, spanId: call.spanId, attributes: { 'consent.coalesced': true } }]);
  });

  it('forward-auth: the proxy\'s trace reaches the service through the sidecar\'s spans', async () => {
    const [traceId, proxySpan] = [hex(16), hex(8)];
    expect(await forwardAuth(serve, 'secret-user-ref-3', 'newsletter', ['traceparent', traceparentOf(traceId, proxySpan)])).toStrictEqual({ status: 200, source: 'upstream' });
    await expect.poll(() => otlp.trace(traceId).length, PATIENTLY).toBe(2);
    const server = otlp.trace(traceId).find((s) => s.kind === SERVER)!;
    const client = otlp.trace(traceId).find((s) => s.kind === CLIENT)!;
    expect(server).toMatchObject({ name: 'GET /sidecar/forward-auth', parentSpanId: proxySpan, attributes: { 'consent.route': 'forward_auth', 'consent.decision': 'allow', 'consent.config_key': 'newsletter' } });
    expect(client.parentSpanId).toBe(server.spanId);
    expect(lastAt(upstream, '/v1/authorization/check').headers.traceparent).toBe(traceparentOf(traceId, client.spanId));
  });

  it('passthrough: the service\'s call carries the sidecar\'s client span, child of the request\'s', async () => {
    const [traceId, appSpan] = [hex(16), hex(8)];
    expect((await ask(serve, 'GET', '/v1/consents/abc?x=1', ['traceparent', traceparentOf(traceId, appSpan)])).status).toBe(200);
    await expect.poll(() => otlp.trace(traceId).length, PATIENTLY).toBe(2);
    const server = otlp.trace(traceId).find((s) => s.kind === SERVER)!;
    const client = otlp.trace(traceId).find((s) => s.kind === CLIENT)!;
    expect(server).toMatchObject({ name: 'GET /v1/*', parentSpanId: appSpan, attributes: { 'consent.route': 'passthrough', 'http.response.status_code': 200 } });
    expect(client).toMatchObject({ name: 'GET', parentSpanId: server.spanId, attributes: { 'http.request.method': 'GET', 'server.address': '127.0.0.1' } });
    // the path may name a user: no url.full on a passthrough call
    expect(client.attributes['url.full']).toBeUndefined();
    expect(lastAt(upstream, '/v1/consents/abc').headers.traceparent).toBe(traceparentOf(traceId, client.spanId));
  });

  it('passthrough to a service that resets the connection: a 502 span marked fail-closed, the call a network error', async () => {
    upstream.enqueue({ fault: 'reset' });
    const traceId = hex(16);
    expect((await ask(serve, 'GET', '/v1/consents/gone', ['traceparent', traceparentOf(traceId, hex(8))])).status).toBe(502);
    await expect.poll(() => otlp.trace(traceId).length, PATIENTLY).toBe(2);
    expect(otlp.trace(traceId).find((s) => s.kind === SERVER)).toMatchObject({ attributes: { 'http.response.status_code': 502, 'consent.decision.source': 'fail-closed', 'error.type': 'upstream_unreachable' }, status: { code: 2 } });
    expect(otlp.trace(traceId).find((s) => s.kind === CLIENT)).toMatchObject({ attributes: { 'consent.upstream.outcome': 'network_error', 'error.type': 'network_error' } });
  });

  // A delivery's span is a root of the sidecar's own (its trace id, its sampling) linked to the
  // sender's span once the signature verified; it used to be the sender's child, which let an
  // unsigned sender choose the trace id and the sampling of what the sidecar exports.
  it('a webhook: a root server span with verify, dedup and forward children, linked to the sender\'s span', async () => {
    const event = signedEvent('evt_traced_1', 1);
    const [traceId, senderSpan] = [hex(16), hex(8)];
    const res = await fetch(`${serve.urls.webhook}/webhooks`, { method: 'POST', headers: { ...event.headers, traceparent: traceparentOf(traceId, senderSpan) }, body: event.body });
    expect(res.status).toBe(200);
    const linked = (): OtlpSpan | undefined => otlp.spans.find((s) => s.kind === SERVER && s.links.some((l) => l.traceId === traceId && l.spanId === senderSpan));
    await expect.poll(() => linked() && otlp.trace(linked()!.traceId).length, PATIENTLY).toBe(4);
    const root = linked()!;
    expect(root).toMatchObject({ name: 'POST /webhooks', parentSpanId: undefined, attributes: { 'http.response.status_code': 200, 'consent.webhook.outcome': 'accepted' } });
    expect(root.traceId).not.toBe(traceId);
    const children = otlp.trace(root.traceId).filter((s) => s.parentSpanId === root.spanId);
    expect(children.map((s) => s.name).sort()).toEqual(['consent.webhook.dedup', 'consent.webhook.forward', 'consent.webhook.verify']);
    expect(children.every((s) => s.kind === INTERNAL)).toBe(true);
    expect(otlp.trace(traceId)).toEqual([]);
    expect(app.count('evt_traced_1')).toBe(1);
  });

  it('a bad signature: the delivery\'s span says 401, nothing forwarded, and nothing is exported under the sender\'s trace', async () => {
    const event = signedEvent('evt_traced_bad', 2);
    const traceId = hex(16);
    const before = otlp.spans.filter((s) => s.kind === SERVER && s.attributes['http.response.status_code'] === 401).length;
    const res = await fetch(`${serve.urls.webhook}/webhooks`, { method: 'POST', headers: { ...event.headers, 'x-service-signature': 'v1=' + 'A'.repeat(44), traceparent: traceparentOf(traceId, hex(8)) }, body: event.body });
    expect(res.status).toBe(401);
    const refused = (): OtlpSpan[] => otlp.spans.filter((s) => s.kind === SERVER && s.name === 'POST /webhooks' && s.attributes['http.response.status_code'] === 401);
    await expect.poll(() => refused().length, PATIENTLY).toBe(before + 1);
    expect(refused().at(-1)!).toMatchObject({ parentSpanId: undefined, links: [] });
    expect(otlp.trace(traceId)).toEqual([]);
    expect(app.count('evt_traced_bad')).toBe(0);
  });
});

describe('a REDEC run with spans on', () => {
  it('is a root span of its own, one per run', async () => {
    const upstream = await startUpstream(service);
    const otlp = await startOtlpReceiver();
    const app = new RecordingApp();
    await app.up();
    const serve = new ServeProcess(flagsFor(upstream, app, { 'redec-reconcile-interval-ms': '100' }), { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_BSP_SCHEDULE_DELAY: '50' });
    await serve.start();
    try {
      await until(async () => (await serve.metric('consent_sidecar_redec_reconcile_runs_total', { outcome: 'ok' })) >= 2, 'two REDEC runs');
      await expect.poll(() => otlp.spans.filter((s) => s.name === 'consent.redec.reconcile').length, PATIENTLY).toBeGreaterThanOrEqual(2);
      const runs = otlp.spans.filter((s) => s.name === 'consent.redec.reconcile');
      expect(runs.every((s) => s.parentSpanId === undefined && s.kind === INTERNAL)).toBe(true);
      expect(runs[0]!.attributes).toStrictEqual({ 'consent.outcome': 'ok' });
      expect(new Set(runs.map((s) => s.traceId)).size).toBe(runs.length);
      expect(otlp.errors).toEqual([]);
    } finally {
      await serve.stop();
      await app.down();
      await otlp.close();
      await upstream.close();
    }
  }, 60_000);
});
