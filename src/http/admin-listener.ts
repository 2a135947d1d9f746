import type { Server, ServerResponse } from 'node:http';
import { createServer } from '../lib/node-http.js';
import type { Registry } from 'prom-client';
import type { Readiness } from '../observability/index.js';
import { pathOf, routeTable } from './route-table.js';
import { TIMEOUT_CHECK_INTERVAL_MS } from './listener-bounds.js';

function json(res: ServerResponse, status: number, body: object): void {
  const text = JSON.stringify(body);
  res.writeHead(status, ['content-type', 'application/json', 'content-length', String(Buffer.byteLength(text)), 'cache-control', 'no-store']).end(text);
}

/** `0.0.0.0:7702`: `/metrics` for Prometheus, `/healthz` (alive) and `/readyz` for kubelet; one route table on node:http. */
export function createAdminListener(o: { registry: Registry; readiness: Readiness }): Server {
  const get = ['GET', 'HEAD'];
  const dispatch = routeTable(
    [
      {
        path: '/metrics',
        match: 'path',
        methods: get,
        handle: (_req, res) => {
          o.registry.metrics().then(
            (text) => res.writeHead(200, ['content-type', o.registry.contentType, 'content-length', String(Buffer.byteLength(text))]).end(text),
            (err: unknown) => json(res, 500, { error: 'metrics_failed', detail: (err as Error)?.message ?? String(err) }),
          );
        },
      },
      { path: '/healthz', match: 'path', methods: get, handle: (_req, res) => json(res, 200, { status: 'ok' }) },
      {
        path: '/readyz',
        match: 'path',
        methods: get,
        handle: (_req, res) => (o.readiness.ready ? json(res, 200, { status: 'ready' }) : json(res, 503, { status: 'not_ready', reasons: o.readiness.reasons })),
      },
    ],
    (req, res) => {
      req.resume();
      json(res, 404, { error: 'not_found', detail: `no route for ${req.method} ${pathOf(req.url ?? '')}` });
    },
  );
  return createServer({ connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS }, dispatch);
}
