import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';

/** One span as an OTLP/HTTP receiver decoded it, with its resource's attributes beside it. */
export interface OtlpSpan {
  readonly traceId: string;
  readonly spanId: string;
  /** Absent (or empty) for a root span. */
  readonly parentSpanId?: string;
  readonly name: string;
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client. */
  readonly kind: number;
  readonly attributes: Record<string, unknown>;
  readonly links: readonly { traceId: string; spanId: string; attributes: Record<string, unknown> }[];
  readonly status: { code?: number; message?: string };
  readonly resource: Record<string, unknown>;
}

export const SERVER = 2;
export const CLIENT = 3;
export const INTERNAL = 1;

/** OTLP/JSON's AnyValue (opentelemetry-proto, common.proto, in the protobuf JSON mapping OTLP/JSON uses). */
type AnyValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number; arrayValue?: { values?: AnyValue[] } };
type KeyValue = { key: string; value: AnyValue };
interface ExportTraceServiceRequest {
  resourceSpans?: {
    resource?: { attributes?: KeyValue[] };
    scopeSpans?: { spans?: (Omit<OtlpSpan, 'attributes' | 'links' | 'resource'> & { attributes?: KeyValue[]; links?: { traceId: string; spanId: string; attributes?: KeyValue[] }[] })[] }[];
  }[];
}

const anyValue = (v: AnyValue): unknown =>
  v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : (v.boolValue ?? v.doubleValue ?? v.arrayValue?.values?.map(anyValue)));
const attributesOf = (kvs: KeyValue[] | undefined): Record<string, unknown> => Object.fromEntries((kvs ?? []).map((a) => [a.key, anyValue(a.value)]));

/** OTLP/JSON writes ids as lower-case hex (not protobuf JSON's base64): 32 digits a trace, 16 a span. */
const TRACE_ID = /^[0-9a-f]{32}$/;
const SPAN_ID = /^[0-9a-f]{16}$/;

/**
 * Decodes one OTLP/HTTP export request (`POST /v1/traces`) as the OpenTelemetry JS exporter encodes
 * it in JSON (the OTLP specification's JSON encoding of ExportTraceServiceRequest), gzip or not.
 * Throws on anything else, so a test sees a malformed export as an error, not as missing spans.
 */
export function decodeExport(req: IncomingMessage, body: Buffer): OtlpSpan[] {
  if (req.method !== 'POST' || req.url !== '/v1/traces') throw new Error(`not an OTLP traces export: ${req.method} ${req.url}`);
  if (!String(req.headers['content-type']).startsWith('application/json')) throw new Error(`not OTLP/JSON: content-type ${req.headers['content-type']}`);
  const bytes = req.headers['content-encoding'] === 'gzip' ? gunzipSync(body) : body;
  const decoded = JSON.parse(bytes.toString('utf8')) as ExportTraceServiceRequest;
  const spans: OtlpSpan[] = [];
  for (const rs of decoded.resourceSpans ?? []) {
    const resource = attributesOf(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        if (!TRACE_ID.test(s.traceId) || !SPAN_ID.test(s.spanId) || (s.parentSpanId && !SPAN_ID.test(s.parentSpanId))) throw new Error(`ids not OTLP/JSON hex: ${JSON.stringify(s)}`);
        const links = (s.links ?? []).map((l) => ({ traceId: l.traceId, spanId: l.spanId, attributes: attributesOf(l.attributes) }));
        spans.push({ ...s, parentSpanId: s.parentSpanId || undefined, attributes: attributesOf(s.attributes), links, status: s.status ?? {}, resource });
      }
    }
  }
  return spans;
}

export interface OtlpReceiver {
  /** The base URL, for `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  readonly url: string;
  /** Every span received so far, in order of arrival. */
  readonly spans: OtlpSpan[];
  /** Export requests received (any content). */
  readonly posts: number;
  /** Export requests that did not decode (each answered 400). */
  readonly errors: string[];
  /** The spans of one trace. */
  trace(traceId: string): OtlpSpan[];
  close(): Promise<void>;
}

/** A real OTLP/HTTP trace receiver on `127.0.0.1:0`, answering as a collector does (200 `{}`). */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: OtlpSpan[] = [];
  const errors: string[] = [];
  let posts = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      posts++;
      try {
        spans.push(...decodeExport(req, Buffer.concat(chunks)));
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{}');
      } catch (err) {
        errors.push((err as Error).message);
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end('{}');
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    errors,
    get posts() {
      return posts;
    },
    trace: (traceId) => spans.filter((s) => s.traceId === traceId),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
