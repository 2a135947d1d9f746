import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import type { Registry } from 'prom-client';
import { staticSecret, type RequiredHeader, type Secret, type WebhookConfig } from '../../src/config/index.js';
import { createWebhookListener } from '../../src/http/webhook-listener.js';
import { buildWebhooks, type WebhookPorts } from '../../src/webhooks/index.js';
import type { Logger } from '../../src/observability/index.js';
import { baseUrlOf, closeGracefully, listen } from '../../src/http/listen.js';
import type { Revocation, RevocationHook, RevocationPublisher } from '../../src/lib/revocation-hook.js';
import { createRegistry, silentLogger } from '../../src/observability/index.js';

export const FIXTURES = new URL('../fixtures/webhooks/', import.meta.url);
export const SECRET_A = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
export const SECRET_B = 'whsec_c2Vjb25kLXNlY3JldC1mb3Itcm90YXRpb24=';
/** Timestamp the openssl vectors were made for. */
export const VECTOR_TS = 1767225600;

export interface Vector {
  readonly file: string;
  readonly body: Buffer;
  readonly timestamp: number;
  readonly secret: string;
  readonly hex: string;
}

export function loadVectors(): Vector[] {
  return readFileSync(new URL('vectors.tsv', FIXTURES), 'utf8')
    .split('\n')
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((line) => {
      const [file, ts, secret, hex] = line.split('\t') as [string, string, string, string];
      return { file, body: readFileSync(new URL(file, FIXTURES)), timestamp: Number(ts), secret, hex };
    });
}

/** Signed by node:crypto here, independently of src/webhooks/signature.ts. */
export function sign(secret: string, timestamp: number | string, body: Buffer | string): string {
  const mac = createHmac('sha256', secret);
  mac.update(`${timestamp}.`);
  mac.update(body);
  return `v1=${mac.digest('hex')}`;
}

export function envelope(fields: Partial<Record<string, unknown>> = {}): Buffer {
  return Buffer.from(
    JSON.stringify({ id: 'evt_1', sequence: 1, type: 'redec.access.occurred', occurredAt: 1767225590000, data: {}, ...fields }),
  );
}

export interface Received {
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
}

export interface FakeApp {
  readonly url: string;
  readonly received: Received[];
  /** Status (or 'hang') to answer with; change it between requests. */
  behaviour: { status: number } | 'hang';
  /** Delay before answering (ms). */
  delayMs: number;
  close(): Promise<void>;
}

export async function startApp(): Promise<FakeApp> {
  const app: FakeApp = {
    url: '',
    received: [],
    behaviour: { status: 204 },
    delayMs: 0,
    close: async () => undefined,
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      app.received.push({ headers: req.headers, body: Buffer.concat(chunks) });
      const behaviour = app.behaviour;
      if (behaviour === 'hang') return;
      setTimeout(() => res.writeHead(behaviour.status).end('ok'), app.delayMs);
    });
  });
  const info = await listen(server, { host: '127.0.0.1', port: 0 });
  Object.assign(app, {
    url: `${baseUrlOf(info)}/hooks?tenant=t1`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
  return app;
}

/** A revocation publisher (one replica: its own cache) that records what it was asked to purge. */
export class RecordingRevocations implements RevocationHook, RevocationPublisher {
  readonly calls: string[] = [];
  publish(revocation: Revocation): Promise<void> {
    if (revocation.scope === 'user') this.revokeUser(revocation.userReference);
    else this.revokeAll();
    return Promise.resolve();
  }
  revokeUser(userReference: string): number {
    this.calls.push(`user:${userReference}`);
    return 1;
  }
  revokeAll(): number {
    this.calls.push('all');
    return 1;
  }
}

export interface SidecarUnderTest {
  readonly url: string;
  readonly registry: Registry;
  readonly revocations: RecordingRevocations;
  close(): Promise<void>;
}

export interface SidecarOptions {
  /** The default route (`--app-webhook-url`); null: only `routes`. */
  appUrl: string | null;
  /** `--app-webhook-route` (glob → URL), in order. */
  routes?: readonly { glob: string; url: string }[];
  /** `--app-webhook-ignore` globs. */
  ignore?: readonly string[];
  secrets?: readonly string[];
  requiredHeader?: RequiredHeader;
  /** Instead of `requiredHeader`: the secret itself (one that rotates, say). */
  requiredHeaderSecret?: Secret<RequiredHeader>;
  toleranceS?: number;
  maxBodyBytes?: number;
  forwardTimeoutMs?: number;
  maxUnverifiedBytes?: number;
  maxUnverifiedBytesPerPeer?: number;
  bodyTimeoutMs?: number;
  minBodyRateBytes?: number;
  now?: () => number;
  /** Defaults to a fresh {@link RecordingRevocations}. */
  revocations?: RecordingRevocations;
}

export function webhookConfig(o: SidecarOptions): WebhookConfig {
  return {
    appUrl: o.appUrl === null ? null : new URL(o.appUrl),
    routes: (o.routes ?? []).map((r) => ({ glob: r.glob, url: new URL(r.url) })),
    ignore: o.ignore ?? [],
    path: '/webhooks',
    secrets: staticSecret(o.secrets ?? [SECRET_A], '--webhook-secret'),
    toleranceS: o.toleranceS ?? 300,
    maxBodyBytes: o.maxBodyBytes ?? 65_536,
    requiredHeader: o.requiredHeaderSecret ?? (o.requiredHeader ? staticSecret(o.requiredHeader, '--webhook-required-header') : null),
    forwardTimeoutMs: o.forwardTimeoutMs ?? 2000,
    dedupLeaseMs: (o.forwardTimeoutMs ?? 2000) + 5000,
    queueHorizonMs: 259_200_000,
    delivery: 'passthrough',
    dedupRetentionMs: 86_400_000,
    dedupMaxEntries: 10_000,
    queueMaxEvents: 100_000,
    maxUnverifiedBytes: o.maxUnverifiedBytes ?? 16_777_216,
    // Every test sender is 127.0.0.1: one peer, allowed the whole budget unless a test says otherwise.
    maxUnverifiedBytesPerPeer: o.maxUnverifiedBytesPerPeer ?? o.maxUnverifiedBytes ?? 16_777_216,
    bodyTimeoutMs: o.bodyTimeoutMs ?? 10_000,
    minBodyRateBytes: o.minBodyRateBytes ?? 4096,
  };
}

/** The webhook wing (`buildWebhooks`) behind its real listener on loopback, as `serve` builds them. */
export async function startWebhookListener(o: {
  config: WebhookConfig;
  logger?: Logger;
  registry: Registry;
  revocations: RevocationPublisher;
  now?: () => number;
  shared?: WebhookPorts['shared'];
}): Promise<{ url: string; port: number; close(): Promise<void> }> {
  const logger = o.logger ?? silentLogger();
  const wing = buildWebhooks(o.config, { logger, registry: o.registry, revocations: o.revocations, now: o.now ?? Date.now, tracer: null, shared: o.shared ?? null });
  await wing.start();
  const server = createWebhookListener(wing, logger);
  const info = await listen(server, { host: '127.0.0.1', port: 0 });
  return {
    url: `${baseUrlOf(info)}${o.config.path}`,
    port: info.port,
    close: async () => {
      await closeGracefully(server, 1000);
      await wing.close();
    },
  };
}

export async function startSidecar(o: SidecarOptions): Promise<SidecarUnderTest> {
  const registry = createRegistry({ defaultMetrics: false });
  const revocations = o.revocations ?? new RecordingRevocations();
  const hooks = await startWebhookListener({ config: webhookConfig(o), registry, revocations, ...(o.now ? { now: o.now } : {}) });
  return { url: hooks.url, registry, revocations, close: () => hooks.close() };
}

export interface Reply {
  readonly status: number;
  readonly body: string;
}

export async function post(url: string, body: Buffer | string, headers: Record<string, string>, method = 'POST'): Promise<Reply> {
  const res = await request(url, { method: method as 'POST', headers, body });
  return { status: res.statusCode, body: await res.body.text() };
}

/** Headers of a delivery signed at `timestamp`, as the service sends them. */
export function deliveryHeaders(secret: string, timestamp: number | string, body: Buffer | string, eventId = 'evt_1'): Record<string, string> {
  return {
    'content-type': 'application/json',
    'user-agent': 'Service-Webhooks/1.0',
    'x-service-event-id': eventId,
    'x-service-delivery-id': `dlv_${Math.random().toString(36).slice(2)}`,
    'x-service-timestamp': String(timestamp),
    'x-service-signature': sign(secret, timestamp, body),
  };
}

/** Value of one series of a metric family, 0 when absent. */
export async function metricValue(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number> {
  const metric = registry.getSingleMetric(name);
  if (!metric) throw new Error(`no metric ${name}`);
  const data = await metric.get();
  const series = data.values.find((v) => Object.entries(labels).every(([k, val]) => String(v.labels[k]) === val));
  return series?.value ?? 0;
}

export const nowS = (): number => Math.floor(Date.now() / 1000);
export type { AddressInfo };
