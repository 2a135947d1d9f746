import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allow, startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { PATIENTLY } from '../helpers/wait.js';
import { deliver, RecordingApp, SECRET, ServeProcess, signedEvent } from './replicas.js';

/**
 * Trace context and OpenTelemetry (CONTRACT, Decision API, "Trace context"), end to end: a real
 * `serve`, a scriptable service that records the headers it gets, a recording app, and a real
 * OTLP/HTTP receiver that decodes what the exporter sends (OTLP's JSON encoding).
 */

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  links: { traceId: string; spanId: string }[];
  status: { code?: number };
}

/** An OTLP/HTTP trace receiver on loopback: every span it was sent, decoded. */
async function startOtlpReceiver(): Promise<{ url: string; spans: OtlpSpan[]; posts: number; close(): Promise<void> }> {
  const spans: OtlpSpan[] = [];
  let posts = 0;
  const value = (v: Record<string, unknown>): unknown => v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : (v.boolValue ?? v.doubleValue));
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      posts++;
      expect(req.url).toBe('/v1/traces');
      const decoded = JSON.parse(body) as { resourceSpans: { scopeSpans: { spans: (Omit<OtlpSpan, 'attributes'> & { attributes: { key: string; value: Record<string, unknown> }[] })[] }[] }[] };
      for (const rs of decoded.resourceSpans) {
        for (const ss of rs.scopeSpans) {
          for (const s of ss.spans) spans.push({ ...s, attributes: Object.fromEntries(s.attributes.map((a) => [a.key, value(a.value)])) });
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    get posts() {
      return posts;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

const hex = (bytes: number): string => randomBytes(bytes).toString('hex');
const traceparentOf = (traceId: string, spanId: string): string => `00-${traceId}-${spanId}-01`;

function flagsFor(upstream: ScriptedUpstream, app: RecordingApp): Record<string, string> {
  return {
    'upstream-url': upstream.url,
    'api-key': 'trace-key',
    listen: '127.0.0.1:0',
    'webhook-listen': '127.0.0.1:0',
    'admin-listen': '127.0.0.1:0',
    'app-webhook-url': app.url,
    'webhook-secret': SECRET,
    'redec-reconcile-interval-ms': '0',
    'shutdown-timeout-ms': '2000',
  };
}

async function check(s: ServeProcess, userReference: string, configKey: string, headers: Record<string, string>): Promise<{ status: number; source: string | null }> {
  const res = await fetch(`${s.urls.decision}/v1/authorization/check`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ userReference, configKey }) });
  await res.text();
  return { status: res.status, source: res.headers.get('x-consent-decision-source') };
}

describe('OpenTelemetry spans on (OTEL_EXPORTER_OTLP_ENDPOINT)', () => {
  let upstream: ScriptedUpstream;
  let otlp: Awaited<ReturnType<typeof startOtlpReceiver>>;
  const app = new RecordingApp();
  let serve: ServeProcess;

  beforeAll(async () => {
    upstream = await startUpstream((req) => ({ body: allow(JSON.parse(req.body).configKey, Date.now() + 60_000) }));
    otlp = await startOtlpReceiver();
    await app.up();
    serve = new ServeProcess(flagsFor(upstream, app), { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_BSP_SCHEDULE_DELAY: '50', OTEL_SERVICE_NAME: 'shop-consent' });
    await serve.start();
  }, 60_000);

  afterAll(async () => {
    await serve?.stop();
    await app.down();
    await otlp?.close();
    await upstream?.close();
  });

  it('a miss: the app\'s trace id is the one the service sees and the one on the spans; the service\'s parent is the sidecar\'s client span, a child of its server span', async () => {
    const [traceId, appSpan] = [hex(16), hex(8)];
    expect(await check(serve, 'secret-user-ref-1', 'marketing-email', { traceparent: traceparentOf(traceId, appSpan), tracestate: 'shop=1' })).toStrictEqual({ status: 200, source: 'upstream' });
    const seen = upstream.requests.at(-1)!.headers;
    const [, seenTrace, seenParent] = String(seen.traceparent).split('-');
    expect(seenTrace).toBe(traceId);
    expect(seen.tracestate).toBe('shop=1');

    await expect.poll(() => otlp.spans.filter((s) => s.traceId === traceId).length, PATIENTLY).toBe(2);
    const server = otlp.spans.find((s) => s.traceId === traceId && s.kind === 2)!;
    const client = otlp.spans.find((s) => s.traceId === traceId && s.kind === 3)!;
    expect(server).toMatchObject({
      name: 'POST /v1/authorization/check',
      parentSpanId: appSpan,
      attributes: { 'http.route': '/v1/authorization/check', 'consent.route': 'check', 'consent.decision': 'allow', 'consent.decision.source': 'upstream', 'consent.config_key': 'marketing-email', 'http.response.status_code': 200 },
    });
    expect(client).toMatchObject({ name: 'POST', parentSpanId: server.spanId, attributes: { 'http.request.method': 'POST', 'server.address': '127.0.0.1', 'consent.upstream.outcome': 'ok' } });
    expect(seenParent).toBe(client.spanId);
    // never the user reference, in any span
    expect(JSON.stringify(otlp.spans)).not.toContain('secret-user-ref');
  });

  it('a hit exports one span and calls nothing', async () => {
    const calls = upstream.checks;
    const traceId = hex(16);
    expect(await check(serve, 'secret-user-ref-1', 'marketing-email', { traceparent: traceparentOf(traceId, hex(8)) })).toStrictEqual({ status: 200, source: 'cache' });
    await expect.poll(() => otlp.spans.filter((s) => s.traceId === traceId).length, PATIENTLY).toBe(1);
    expect(otlp.spans.find((s) => s.traceId === traceId)).toMatchObject({ kind: 2, attributes: { 'consent.decision.source': 'cache', 'consent.decision': 'allow' } });
    expect(upstream.checks).toBe(calls);
  });

  it('coalesced misses: one call to the service, and the request that joined it links to that call', async () => {
    // The service holds its answer until both requests are in: the second joins the first's call.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    upstream.enqueue((req) => ({ body: allow(JSON.parse(req.body).configKey, Date.now() + 60_000), hold: held }));
    const [a, b] = [hex(16), hex(16)];
    const calls = upstream.checks;
    const coalesced = await serve.metric('consent_sidecar_upstream_coalesced_total');
    const first = check(serve, 'secret-user-ref-2', 'marketing-email', { traceparent: traceparentOf(a, hex(8)) });
    await upstream.waitForCount(upstream.count + 1);
    const second = check(serve, 'secret-user-ref-2', 'marketing-email', { traceparent: traceparentOf(b, hex(8)) });
    await expect.poll(() => serve.metric('consent_sidecar_upstream_coalesced_total'), PATIENTLY).toBe(coalesced + 1);
    release();
    expect((await first).source).toBe('upstream');
    expect((await second).source).toBe('upstream');
    expect(upstream.checks).toBe(calls + 1);
    await expect.poll(() => otlp.spans.filter((s) => s.traceId === b).length, PATIENTLY).toBe(1);
    await expect.poll(() => otlp.spans.filter((s) => s.traceId === a && s.kind === 3).length, PATIENTLY).toBe(1);
    const call = otlp.spans.find((s) => s.traceId === a && s.kind === 3)!;
    const joined = otlp.spans.find((s) => s.traceId === b)!;
    expect(joined.links).toEqual([expect.objectContaining({ traceId: a, spanId: call.spanId })]);
  });

  it('a webhook: a server span with verify, dedup and forward children', async () => {
    const event = signedEvent('evt_traced_1', 1);
    const traceId = hex(16);
    const res = await fetch(`${serve.urls.webhook}/webhooks`, { method: 'POST', headers: { ...event.headers, traceparent: traceparentOf(traceId, hex(8)) }, body: event.body });
    expect(res.status).toBe(200);
    await expect.poll(() => otlp.spans.filter((s) => s.traceId === traceId).length, PATIENTLY).toBe(4);
    const root = otlp.spans.find((s) => s.traceId === traceId && s.kind === 2)!;
    expect(root).toMatchObject({ name: 'POST /webhooks', attributes: { 'http.response.status_code': 200, 'consent.webhook.outcome': 'accepted' } });
    const children = otlp.spans.filter((s) => s.traceId === traceId && s.parentSpanId === root.spanId).map((s) => s.name).sort();
    expect(children).toEqual(['consent.webhook.dedup', 'consent.webhook.forward', 'consent.webhook.verify']);
    expect(app.count('evt_traced_1')).toBe(1);
  });

  it('a bad signature: the verify step and the delivery are marked failed, nothing forwarded', async () => {
    const event = signedEvent('evt_traced_bad', 2);
    const traceId = hex(16);
    const res = await fetch(`${serve.urls.webhook}/webhooks`, { method: 'POST', headers: { ...event.headers, 'x-service-signature': 'v1=' + 'A'.repeat(44), traceparent: traceparentOf(traceId, hex(8)) }, body: event.body });
    expect(res.status).toBe(401);
    await expect.poll(() => otlp.spans.filter((s) => s.traceId === traceId && s.kind === 2).length, PATIENTLY).toBe(1);
    expect(otlp.spans.find((s) => s.traceId === traceId && s.kind === 2)).toMatchObject({ attributes: { 'http.response.status_code': 401 } });
    expect(app.count('evt_traced_bad')).toBe(0);
  });
});

describe('tracing off (no OTLP endpoint): nothing exported, the app\'s traceparent reaches the service as it came', () => {
  let upstream: ScriptedUpstream;
  let otlp: Awaited<ReturnType<typeof startOtlpReceiver>>;
  const app = new RecordingApp();
  let serve: ServeProcess;

  beforeAll(async () => {
    upstream = await startUpstream((req) => ({ body: allow(JSON.parse(req.body).configKey, Date.now() + 60_000) }));
    otlp = await startOtlpReceiver();
    await app.up();
    // The receiver is up but not configured: OTEL_SERVICE_NAME alone turns nothing on.
    serve = new ServeProcess(flagsFor(upstream, app), { OTEL_SERVICE_NAME: 'shop-consent' });
    await serve.start();
  }, 60_000);

  afterAll(async () => {
    await serve?.stop();
    await app.down();
    await otlp?.close();
    await upstream?.close();
  });

  it('passes a valid traceparent and tracestate unchanged, drops a malformed one, and exports nothing', async () => {
    const tp = traceparentOf(hex(16), hex(8));
    await check(serve, 'u-off-1', 'marketing-email', { traceparent: tp, tracestate: 'shop=2' });
    expect(upstream.requests.at(-1)!.headers).toMatchObject({ traceparent: tp, tracestate: 'shop=2' });
    for (const bad of ['00-' + '0'.repeat(32) + '-' + hex(8) + '-01', 'ff-' + hex(16) + '-' + hex(8) + '-01', '00-' + hex(16) + '-' + hex(8) + '-01-extra', 'garbage']) {
      const before = upstream.checks;
      await check(serve, `u-off-${bad.length}-${hex(2)}`, 'marketing-email', { traceparent: bad, tracestate: 'shop=3' });
      expect(upstream.checks).toBe(before + 1);
      expect(upstream.requests.at(-1)!.headers.traceparent, bad).toBeUndefined();
      expect(upstream.requests.at(-1)!.headers.tracestate).toBeUndefined();
    }
    // no traceparent: none invented
    await check(serve, 'u-off-none', 'marketing-email', {});
    expect(upstream.requests.at(-1)!.headers.traceparent).toBeUndefined();
    // a webhook goes through as before; nothing was ever sent to the receiver
    expect((await deliver(serve, signedEvent('evt_off_1', 1))).status).toBe(200);
    expect(await serve.metric('consent_sidecar_decisions_total', { source: 'upstream' })).toBeGreaterThanOrEqual(6);
    expect(otlp.posts).toBe(0);
  });
});

describe('a collector that is not there costs only dropped spans', () => {
  it('decisions and webhooks answer as before, and serve still stops (the flush waits at most 1 s)', async () => {
    const upstream = await startUpstream((req) => ({ body: allow(JSON.parse(req.body).configKey, Date.now() + 60_000) }));
    const app = new RecordingApp();
    await app.up();
    // A port nothing listens on (the receiver was started and closed).
    const gone = await startOtlpReceiver();
    await gone.close();
    const serve = new ServeProcess(flagsFor(upstream, app), { OTEL_EXPORTER_OTLP_ENDPOINT: gone.url, OTEL_BSP_SCHEDULE_DELAY: '20' });
    await serve.start();
    try {
      for (let i = 0; i < 20; i++) expect((await check(serve, `u-dead-${i}`, 'marketing-email', { traceparent: traceparentOf(hex(16), hex(8)) })).status).toBe(200);
      expect((await deliver(serve, signedEvent('evt_dead_collector', 1))).status).toBe(200);
      expect(serve.running).toBe(true);
    } finally {
      await serve.stop();
      await app.down();
      await upstream.close();
    }
  }, 60_000);
});
