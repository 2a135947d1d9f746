import { createServer, type Server } from 'node:http';
import express from 'express';
import type { Registry } from 'prom-client';
import type { Readiness } from '../observability/index.js';

/** `0.0.0.0:7702`: `/metrics` for Prometheus, `/healthz` (alive) and `/readyz` for kubelet. */
export function createAdminListener(o: { registry: Registry; readiness: Readiness }): Server {
  const app = express();
  app.disable('x-powered-by');
  app.get('/metrics', async (_req, res) => {
    res.set('content-type', o.registry.contentType).send(await o.registry.metrics());
  });
  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/readyz', (_req, res) => {
    if (o.readiness.ready) res.json({ status: 'ready' });
    else res.status(503).json({ status: 'not_ready', reasons: o.readiness.reasons });
  });
  app.use((req, res) => {
    res.status(404).json({ error: 'not_found', detail: `no route for ${req.method} ${req.path}` });
  });
  return createServer(app);
}
