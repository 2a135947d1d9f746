import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { staticSecret, type RedecListingBounds, type RedecListingFields, type RedecReconcileConfig, type UpstreamConfig } from '../../src/config/index.js';
import type { Logger } from '../../src/observability/index.js';
import {
  createRedecMetrics,
  DEFAULT_LISTING_BOUNDS,
  LocalLease,
  MemoryLedger,
  Reconciler,
  type ObligationLedger,
  type ReconcileLease,
} from '../../src/redec/index.js';
import { createRegistry } from '../../src/observability/index.js';
import { AppClient, appUrl } from '../../src/webhooks/index.js';

export function upstreamOf(url: string, apiKey: string, timeoutMs = 2000): UpstreamConfig {
  return { baseUrl: new URL(url), apiKey: staticSecret(apiKey, '--api-key'), timeoutMs };
}

export interface ReconcilerUnderTest {
  readonly reconciler: Reconciler;
  readonly registry: Registry;
  close(): Promise<void>;
}

/** A reconciler on a test clock, delivering with the production forwarder to `appUrl` (or nowhere). */
export function reconcilerFor(o: {
  upstream: UpstreamConfig;
  appUrl: string | null;
  now: () => number;
  logger: Logger;
  graceMs?: number;
  repeatMs?: number;
  pageLimit?: number;
  fields?: RedecListingFields;
  bounds?: RedecListingBounds;
  ledger?: ObligationLedger;
  lease?: ReconcileLease;
  forwardTimeoutMs?: number;
}): ReconcilerUnderTest {
  const registry = createRegistry({ defaultMetrics: false });
  const config: RedecReconcileConfig = {
    intervalMs: 60_000,
    graceMs: o.graceMs ?? 1000,
    repeatMs: o.repeatMs ?? 3_600_000,
    pageLimit: o.pageLimit ?? 2,
    fields: o.fields ?? { itemsField: null, cursorParam: 'cursor' },
    bounds: o.bounds ?? DEFAULT_LISTING_BOUNDS,
  };
  const forwarder = o.appUrl ? new AppClient({ timeoutMs: o.forwardTimeoutMs ?? 2000 }) : null;
  const target = o.appUrl ? appUrl(new URL(o.appUrl)) : null;
  let reconciler: Reconciler | undefined;
  const metrics = createRedecMetrics(registry, () => reconciler?.oldestFirstSeenAt ?? null, o.now);
  reconciler = new Reconciler({
    upstream: o.upstream,
    config,
    ledger: o.ledger ?? new MemoryLedger(),
    lease: o.lease ?? new LocalLease(),
    deliver: forwarder && target ? (b, h) => forwarder.forward(target, b, h) : null,
    metrics,
    logger: o.logger,
    now: o.now,
  });
  const r = reconciler;
  return {
    reconciler: r,
    registry,
    // As serve does: both at once, so a forward the app holds ends with the app client.
    close: () => Promise.all([r.close(), forwarder?.destroy()]).then(() => undefined),
  };
}

/** A scripted listing service: `answer` gets each request's URL and writes the response. */
export async function scriptedService(answer: (url: URL, req: IncomingMessage, res: ServerResponse) => void): Promise<{ url: string; requests: URL[]; close(): Promise<void> }> {
  const requests: URL[] = [];
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    requests.push(url);
    answer(url, req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export const json = (res: ServerResponse, status: number, body: unknown): void => {
  res.writeHead(status, { 'content-type': 'application/json' }).end(typeof body === 'string' ? body : JSON.stringify(body));
};
