import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { Router, type RequestHandler } from 'express';
import type { FaultSpec } from './faults.js';
import { readBody, readJsonObject, sendJson, sendNotFound } from './http-util.js';
import type { SimulatorCore } from './simulator-core.js';

/** What the service routes need besides the core. */
export interface ServiceRouteOptions {
  readonly apiKey: string;
  /** Added to every check before it is answered (ms). */
  readonly latencyMs: number;
}

/** Operations the document references without a shape: answered 501 so a passthrough has something to relay. */
const REFERENCED_ONLY = ['/customers/:customerId/consent-compliance', '/embed/sessions', '/redec/accesses/authorize'];

function authorized(req: IncomingMessage, apiKey: string): boolean {
  const given = Buffer.from(req.headers.authorization ?? '', 'utf8');
  const expected = Buffer.from(`Bearer ${apiKey}`, 'utf8');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** 405 `{error:"method_not_allowed"}` with `allow: <method>`. */
function methodNotAllowed(allow: string): RequestHandler {
  return (_req, res) => {
    res.setHeader('allow', allow);
    sendJson(res, 405, { error: 'method_not_allowed' });
  };
}

/**
 * The service's `/v1/*` route table, mounted below `/v1` (paths here are relative to it). Every
 * request needs `Authorization: Bearer <apiKey>` (401 `{error:"unauthorized"}` otherwise, before
 * anything else):
 *
 * - `POST /v1/authorization/check`: the document's three answer forms; 400 `{error:"invalid_request"}`
 *   when `userReference` or `configKey` is not a string (the document does not show this case).
 * - `GET /v1/redec/notification-requirements?status=&limit=&cursor=`: `{items, nextCursor}` (see
 *   `NotificationRequirement`); `status` optional (`pending`, `evidence_registered`,
 *   `sent_by_service`), `limit` 1..500 (default 50), `cursor` the previous page's `nextCursor`.
 * - `POST /v1/redec/consents/{redecConsentId}/notification-evidence`: body `{}` or
 *   `{notificationReason: "grant"|"revoke"}`; answers 200 `{redecConsentId, resolved: [records]}`,
 *   404 for an unknown id, 409 when nothing is pending.
 * - Another method on those three paths (HEAD included): 405 with `allow`.
 * - Operations the document only references: 501, whatever the method; anything else: 404
 *   `{error:"not_found"}`. Paths are case-sensitive and exact (no trailing slash). Errors are JSON.
 */
export function serviceRouter(core: SimulatorCore, options: ServiceRouteOptions): Router {
  const router = Router({ caseSensitive: true, strict: true });
  router.use((req, res, next) => {
    if (authorized(req, options.apiKey)) next();
    else sendJson(res, 401, { error: 'unauthorized' });
  });

  const onlyPost = methodNotAllowed('POST');
  const onlyGet = methodNotAllowed('GET');
  router
    .route('/authorization/check')
    .post((req, res) => check(core, options, req, res))
    .all(onlyPost);
  // HEAD first: express would otherwise answer HEAD with the GET handler.
  router
    .route('/redec/notification-requirements')
    .head(onlyGet)
    .get((req, res) => {
      const query = new URL(req.url, 'http://simulator').searchParams;
      const limitText = query.get('limit');
      const limit = limitText === null ? undefined : /^\d{1,6}$/.test(limitText) ? Number(limitText) : Number.NaN;
      const page = core.requirements.list({
        ...(query.has('status') ? { status: query.get('status') as string } : {}),
        ...(limit !== undefined ? { limit } : {}),
        ...(query.has('cursor') ? { cursor: query.get('cursor') as string } : {}),
      });
      sendJson(res, 200, page);
    })
    .all(onlyGet);
  router
    .route('/redec/consents/:redecConsentId/notification-evidence')
    .post(async (req, res) => {
      const body = await readJsonObject(req);
      const reason = typeof body.notificationReason === 'string' ? body.notificationReason : undefined;
      const redecConsentId = req.params.redecConsentId as string;
      const resolved = core.requirements.registerEvidence(redecConsentId, core.now(), reason);
      sendJson(res, 200, { redecConsentId, resolved });
    })
    .all(onlyPost);
  router.all(REFERENCED_ONLY, (req, res) => {
    const path = `${req.baseUrl}${req.path}`;
    sendJson(res, 501, { error: 'not_simulated', detail: `${path} is referenced by the interface document without a shape` });
  });
  router.use(sendNotFound);
  return router;
}

async function check(core: SimulatorCore, options: ServiceRouteOptions, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const text = await readBody(req);
  const fault = core.faults.take();
  const latency = options.latencyMs + (fault?.latencyMs ?? 0);
  if (latency > 0) await sleep(latency);
  if (fault?.reset) {
    req.socket.destroy();
    return;
  }
  if (fault?.status !== undefined) return send(res, fault.status, JSON.stringify({ error: 'injected_fault' }), fault);

  let parsed: unknown;
  try {
    parsed = text === undefined ? undefined : JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  const body = parsed as { userReference?: unknown; configKey?: unknown } | undefined;
  // The document does not show the answer to a malformed request; 400 is the simulator's choice.
  if (!body || typeof body.userReference !== 'string' || typeof body.configKey !== 'string') {
    return send(res, 400, JSON.stringify({ error: 'invalid_request' }), fault);
  }
  const answer = JSON.stringify(core.check({ userReference: body.userReference, configKey: body.configKey }));
  if (fault?.malformed) return send(res, 200, answer.slice(0, Math.max(1, Math.floor(answer.length / 2))), fault);
  send(res, 200, answer, fault);
}

function send(res: ServerResponse, status: number, text: string, fault: FaultSpec | undefined): void {
  const bytes = Buffer.from(text, 'utf8');
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': bytes.length });
  if (!fault?.trickleMs) {
    res.end(bytes);
    return;
  }
  const every = fault.trickleMs;
  let i = 0;
  const timer = setInterval(() => {
    if (res.destroyed || i >= bytes.length) {
      clearInterval(timer);
      res.end();
      return;
    }
    res.write(bytes.subarray(i, i + 1));
    i += 1;
  }, every);
  res.on('close', () => clearInterval(timer));
}
