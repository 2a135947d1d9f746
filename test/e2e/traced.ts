import { randomBytes } from 'node:crypto';
import { request } from 'undici';
import { allow, type ReceivedRequest, type Reply, type ScriptedUpstream } from '../helpers/upstream.js';
import { SECRET, type RecordingApp, type ServeProcess } from '../helpers/serve-process.js';

/** Shared by the tracing end-to-end tests (spans on, spans off). */

export const hex = (bytes: number): string => randomBytes(bytes).toString('hex');
export const traceparentOf = (traceId: string, spanId: string, flags = '01'): string => `00-${traceId}-${spanId}-${flags}`;

/** The consent service: an ALLOW for every check, `{}` for anything else (a passthrough target, a REDEC listing). */
export function service(req: ReceivedRequest): Reply {
  if (req.url === '/v1/authorization/check') return { body: allow((JSON.parse(req.body) as { configKey: string }).configKey, Date.now() + 60_000) };
  if (req.url.startsWith('/v1/redec/notification-requirements')) return { body: { items: [], nextCursor: null } };
  return { body: { ok: true } };
}

export function flagsFor(upstream: ScriptedUpstream, app: RecordingApp, extra: Record<string, string> = {}): Record<string, string> {
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
    ...extra,
  };
}

/**
 * One request to the decision listener with `headers` as raw name/value pairs (a header may be
 * given twice, as no fetch would send it). Returns the status and the decision source.
 */
export async function ask(s: ServeProcess, method: string, path: string, headers: string[], body?: string): Promise<{ status: number; source: string | undefined }> {
  const res = await request(`${s.urls.decision}${path}`, { method: method as 'GET', headers: body === undefined ? headers : ['content-type', 'application/json', ...headers], ...(body === undefined ? {} : { body }) });
  await res.body.text();
  const source = res.headers['x-consent-decision-source'];
  return { status: res.statusCode, source: typeof source === 'string' ? source : undefined };
}

/** A check of (userReference, configKey) with these raw headers. */
export const check = (s: ServeProcess, userReference: string, configKey: string, headers: string[] = []): ReturnType<typeof ask> =>
  ask(s, 'POST', '/v1/authorization/check', headers, JSON.stringify({ userReference, configKey }));

/** A forward-auth request as a proxy sends it (`x-user-reference`, `?configKey=`). */
export const forwardAuth = (s: ServeProcess, userReference: string, configKey: string, headers: string[] = []): ReturnType<typeof ask> =>
  ask(s, 'GET', `/sidecar/forward-auth?configKey=${encodeURIComponent(configKey)}`, ['x-user-reference', userReference, ...headers]);

/** The last request the service received on `path` (a prefix), for its headers. */
export function lastAt(upstream: ScriptedUpstream, path: string): ReceivedRequest {
  const r = upstream.requests.filter((q) => q.url.startsWith(path)).at(-1);
  if (!r) throw new Error(`the service received nothing on ${path}`);
  return r;
}
