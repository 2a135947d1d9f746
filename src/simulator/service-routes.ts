import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FaultSpec } from './faults.js';
import { readBody, readJsonObject, sendJson } from './http-util.js';
import type { SimulatorCore } from './simulator-core.js';

/** What the service routes need besides the core. */
export interface ServiceRouteOptions {
  readonly apiKey: string;
  /** Added to every check before it is answered (ms). */
  readonly latencyMs: number;
}

const EVIDENCE_PATH = /^\/v1\/redec\/consents\/([^/]+)\/notification-evidence$/;
// Referenced by the document without shapes: answered 501 so a passthrough has something to relay.
const REFERENCED_ONLY = [/^\/v1\/customers\/[^/]+\/consent-compliance$/, /^\/v1\/embed\/sessions$/, /^\/v1\/redec\/accesses\/authorize$/];

function authorized(req: IncomingMessage, apiKey: string): boolean {
  const given = Buffer.from(req.headers.authorization ?? '', 'utf8');
  const expected = Buffer.from(`Bearer ${apiKey}`, 'utf8');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/**
 * Serves `/v1/*` behind `Authorization: Bearer <apiKey>` (401 `{error:"unauthorized"}` otherwise):
 *
 * - `POST /v1/authorization/check`: the document's three answer forms; 400 `{error:"invalid_request"}`
 *   when `userReference` or `configKey` is not a string (the document does not show this case).
 * - `GET /v1/redec/notification-requirements?status=&limit=&cursor=`: `{items, nextCursor}` (see
 *   `NotificationRequirement`); `status` optional (`pending`, `evidence_registered`,
 *   `sent_by_service`), `limit` 1..500 (default 50), `cursor` the previous page's `nextCursor`.
 * - `POST /v1/redec/consents/{redecConsentId}/notification-evidence`: body `{}` or
 *   `{notificationReason: "grant"|"revoke"}`; answers 200 `{redecConsentId, resolved: [records]}`,
 *   404 for an unknown id, 409 when nothing is pending.
 * - Operations the document only references: 501; anything else: 404. Errors are JSON.
 */
export async function handleService(
  core: SimulatorCore,
  options: ServiceRouteOptions,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
): Promise<void> {
  if (!authorized(req, options.apiKey)) {
    sendJson(res, 401, { error: 'unauthorized' });
    return;
  }
  const path = url.pathname;
  if (path === '/v1/authorization/check') {
    if (req.method !== 'POST') return methodNotAllowed(res, 'POST');
    await check(core, options, req, res);
    return;
  }
  if (path === '/v1/redec/notification-requirements') {
    if (req.method !== 'GET') return methodNotAllowed(res, 'GET');
    const limitText = url.searchParams.get('limit');
    const limit = limitText === null ? undefined : /^\d{1,6}$/.test(limitText) ? Number(limitText) : Number.NaN;
    const page = core.requirements.list({
      ...(url.searchParams.has('status') ? { status: url.searchParams.get('status') as string } : {}),
      ...(limit !== undefined ? { limit } : {}),
      ...(url.searchParams.has('cursor') ? { cursor: url.searchParams.get('cursor') as string } : {}),
    });
    sendJson(res, 200, page);
    return;
  }
  const evidence = EVIDENCE_PATH.exec(path);
  if (evidence) {
    if (req.method !== 'POST') return methodNotAllowed(res, 'POST');
    const body = await readJsonObject(req);
    const reason = typeof body.notificationReason === 'string' ? body.notificationReason : undefined;
    const redecConsentId = decodeURIComponent(evidence[1] as string);
    const resolved = core.requirements.registerEvidence(redecConsentId, core.now(), reason);
    sendJson(res, 200, { redecConsentId, resolved });
    return;
  }
  if (REFERENCED_ONLY.some((re) => re.test(path))) {
    sendJson(res, 501, { error: 'not_simulated', detail: `${path} is referenced by the interface document without a shape` });
    return;
  }
  sendJson(res, 404, { error: 'not_found' });
}

function methodNotAllowed(res: ServerResponse, allow: string): void {
  res.setHeader('allow', allow);
  sendJson(res, 405, { error: 'method_not_allowed' });
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
