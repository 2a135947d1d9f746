import * as otelApi from '@opentelemetry/api';
import { SpanKind } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider, type ReadableSpan } from '@opentelemetry/sdk-trace';
import * as semconv from '@opentelemetry/semantic-conventions';
import { afterEach, describe, expect, it } from 'vitest';
import { Tracing } from '../../src/observability/tracing.js';

const TRACE = '0af7651916cd43dd8448eb211c80319c';
const APP_SPAN = 'b7ad6b7169203331';
const PARENT = `00-${TRACE}-${APP_SPAN}-01`;

function tracingOn(): { tracing: Tracing; spans(): ReadableSpan[] } {
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  const tracing = Tracing.on(otelApi, provider.getTracer('test'), new W3CTraceContextPropagator(), new URL('http://consent.example:8443/api/'), () => provider.shutdown());
  return { tracing, spans: () => exporter.getFinishedSpans() };
}

/** Every attribute name the sidecar writes is a semantic-convention name, or its own `consent.*`. */
const SEMCONV_NAMES = new Set(Object.entries(semconv).filter(([k, v]) => k.startsWith('ATTR_') && typeof v === 'string').map(([, v]) => v as string));
function expectConventionalNames(spans: readonly ReadableSpan[]): void {
  for (const s of spans) for (const name of Object.keys(s.attributes)) if (!name.startsWith('consent.')) expect(SEMCONV_NAMES, `${s.name}: ${name}`).toContain(name);
}

describe('Tracing.OFF (no OTLP endpoint)', () => {
  it('builds nothing without a traceparent, and only the headers to pass on with one', async () => {
    expect(Tracing.OFF.on).toBe(false);
    expect(Tracing.OFF.request('check', 'POST', '/v1/authorization/check', undefined, 'a=1')).toBeNull();
    expect(Tracing.OFF.request('check', 'POST', '/v1/authorization/check', 'garbage', 'a=1')).toBeNull();
    const t = Tracing.OFF.request('check', 'POST', '/v1/authorization/check', PARENT, 'a=1')!;
    expect(t.upstreamCall().headers).toEqual(['traceparent', PARENT, 'tracestate', 'a=1']);
    // Spans off: the webhook wing gets no tracer and runs its steps as they are.
    expect(Tracing.OFF.webhookTracer).toBeNull();
    await expect(Tracing.OFF.run('consent.redec.reconcile', () => Promise.resolve(7))).resolves.toBe(7);
  });
});

describe('Tracing on', () => {
  let on: ReturnType<typeof tracingOn>;
  afterEach(() => on?.tracing.shutdown(1000));

  it('a miss: a server span under the app\'s, a client span under it whose context is the traceparent sent', () => {
    on = tracingOn();
    const t = on.tracing.request('check', 'POST', '/v1/authorization/check', PARENT, 'shop=1')!;
    const call = t.upstreamCall();
    call.end('ok');
    t.end({ status: 200, decision: 'allow', source: 'upstream' }, 'marketing-email');
    const [client, server] = on.spans();
    expect(server).toMatchObject({ name: 'POST /v1/authorization/check', kind: SpanKind.SERVER, parentSpanContext: { spanId: APP_SPAN } });
    expect(server!.spanContext().traceId).toBe(TRACE);
    expect(server!.attributes).toStrictEqual({
      'http.request.method': 'POST',
      'http.route': '/v1/authorization/check',
      'http.response.status_code': 200,
      'consent.route': 'check',
      'consent.decision': 'allow',
      'consent.decision.source': 'upstream',
      'consent.config_key': 'marketing-email',
    });
    expect(client).toMatchObject({ name: 'POST', kind: SpanKind.CLIENT, parentSpanContext: { spanId: server!.spanContext().spanId } });
    expect(client!.attributes).toMatchObject({ 'url.full': 'http://consent.example:8443/api/v1/authorization/check', 'server.address': 'consent.example', 'server.port': 8443 });
    // The service's parent is the client span; the app's tracestate goes on.
    expect(call.headers).toEqual(['traceparent', `00-${TRACE}-${client!.spanContext().spanId}-01`, 'tracestate', 'shop=1']);
    expectConventionalNames(on.spans());
  });

  it('no failure is an ALLOW in a span: a failed call and a fail-closed answer carry error.type and an error status', () => {
    on = tracingOn();
    const t = on.tracing.request('forward_auth', 'GET', '/sidecar/forward-auth', undefined, undefined)!;
    t.upstreamCall().end('timeout');
    t.end({ status: 503, decision: 'deny', source: 'fail-closed', cause: 'upstream_timeout' }, 'k');
    const [client, server] = on.spans();
    expect(client!.attributes).toMatchObject({ 'error.type': 'timeout', 'consent.upstream.outcome': 'timeout' });
    expect(client!.status.code).toBe(2);
    expect(server!.attributes).toMatchObject({ 'error.type': 'upstream_timeout', 'consent.fail_closed.cause': 'upstream_timeout', 'consent.decision': 'deny' });
    expect(server!.status.code).toBe(2);
    // no traceparent from the proxy: a trace of its own
    expect(server!.parentSpanContext).toBeUndefined();
    expectConventionalNames(on.spans());
  });

  it('a request that joins a call in flight links to that call\'s span', () => {
    on = tracingOn();
    const first = on.tracing.request('check', 'POST', '/v1/authorization/check', PARENT, undefined)!;
    const second = on.tracing.request('check', 'POST', '/v1/authorization/check', undefined, undefined)!;
    const call = first.upstreamCall();
    second.joined(call);
    call.end('ok');
    for (const t of [first, second]) t.end({ status: 200, decision: 'allow', source: 'upstream' }, 'k');
    const [client, , joined] = on.spans();
    expect(joined!.links).toEqual([expect.objectContaining({ context: client!.spanContext(), attributes: { 'consent.coalesced': true } })]);
  });

  it('a webhook\'s steps are children of its span, and a REDEC run a root of its own', async () => {
    on = tracingOn();
    const w = on.tracing.webhook('/webhooks');
    await w.step('verify', () => Promise.resolve());
    // Verified: the sender's context is linked, never made the parent (it chose none of our spans).
    w.verified([PARENT], undefined);
    // An error's code names the failure in the span, never its message (it may quote what failed).
    const err = Object.assign(new Error('no such user secret-user-ref-9'), { code: 'ERR_APP_REFUSED' });
    await expect(w.step('forward', () => Promise.reject(err))).rejects.toBe(err);
    w.end(503, 'app_unavailable');
    await on.tracing.run('consent.redec.reconcile', () => Promise.resolve('timeout'), (outcome) => ({ outcome, failed: outcome !== 'ok' }));
    const [verify, forward, root, redec] = on.spans();
    expect(forward!.attributes).toStrictEqual({ 'error.type': 'ERR_APP_REFUSED' });
    expect(JSON.stringify(on.spans().map((s) => [s.attributes, s.status]))).not.toContain('secret-user-ref');
    expect(redec!.attributes).toStrictEqual({ 'consent.outcome': 'timeout', 'error.type': 'timeout' });
    // A root of the sidecar's own, linked to the sender's span once verified (it used to be its child,
    // which let an unsigned sender choose the trace id and the sampling of what is exported).
    expect(root).toMatchObject({ name: 'POST /webhooks', parentSpanContext: undefined, attributes: { 'consent.webhook.outcome': 'app_unavailable', 'error.type': 'app_unavailable' } });
    expect(root!.links.map((l) => l.context.spanId)).toEqual([APP_SPAN]);
    expect([verify!.name, forward!.name]).toEqual(['consent.webhook.verify', 'consent.webhook.forward']);
    for (const s of [verify, forward]) expect(s!.parentSpanContext?.spanId).toBe(root!.spanContext().spanId);
    expect(forward!.status.code).toBe(2);
    expect(redec).toMatchObject({ name: 'consent.redec.reconcile', parentSpanContext: undefined });
    expectConventionalNames(on.spans());
  });
});
