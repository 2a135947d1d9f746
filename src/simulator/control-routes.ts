import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { Router, type Request } from 'express';
import type { ConsentTarget, GrantOptions } from './consent-store.js';
import { SimulatorError } from './errors.js';
import { validateFault } from './faults.js';
import { readJsonObject, sendJson, sendNotFound } from './http-util.js';
import type { SimulatorCore } from './simulator-core.js';
import type { WebhookEndpointInput } from './webhook-endpoints.js';

/** Pending obligations one seeding request may add. */
const MAX_SEEDED_OBLIGATIONS = 100_000;

/** Prefix of the control surface. */
export const CONTROL_PREFIX = '/_simulator';

function target(body: Record<string, unknown>): ConsentTarget {
  const problems: string[] = [];
  if (typeof body.userReference !== 'string') problems.push('userReference: expected a string');
  for (const k of ['consentId', 'configKey']) {
    if (body[k] !== undefined && typeof body[k] !== 'string') problems.push(`${k}: expected a string`);
  }
  if (problems.length > 0) throw new SimulatorError('ERR_SIMULATOR_INVALID_INPUT', problems);
  return body as unknown as ConsentTarget;
}

function grantOptions(body: Record<string, unknown>): GrantOptions {
  const problems: string[] = [];
  for (const k of ['expiresAt', 'ttlMs']) {
    const v = body[k];
    if (v !== undefined && !(typeof v === 'number' && Number.isSafeInteger(v) && v >= 0)) problems.push(`${k}: expected an integer >= 0`);
  }
  if (body.scopes !== undefined && !(Array.isArray(body.scopes) && body.scopes.every((s) => typeof s === 'string'))) {
    problems.push('scopes: expected an array of strings');
  }
  if (problems.length > 0) throw new SimulatorError('ERR_SIMULATOR_INVALID_INPUT', problems);
  return body as GrantOptions;
}

function tokenOk(req: IncomingMessage, token: string | undefined): boolean {
  if (token === undefined) return true;
  const given = Buffer.from(String(req.headers['x-simulator-control-token'] ?? ''), 'utf8');
  const expected = Buffer.from(token, 'utf8');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** One control route: what it answers (status, body) for a request. */
type ControlRoute = (core: SimulatorCore, req: Request) => Promise<[number, unknown]> | [number, unknown];

function state(core: SimulatorCore): [number, unknown] {
  return [
    200,
    {
      configKeys: core.store.configKeys(),
      consents: core.store.snapshot().map(({ userReference, consentId, record }) => ({
        userReference,
        consentId,
        ...record,
        ...(record.scopes ? { scopes: [...record.scopes] } : {}),
      })),
      webhookEndpoints: core.sender.endpoints().map(({ secret: _secret, header, ...e }) => ({ ...e, ...(header ? { header: header.name } : {}) })),
      fault: core.faults.current() ?? null,
    },
  ];
}

async function emitEvent(core: SimulatorCore, req: IncomingMessage): Promise<[number, unknown]> {
  const body = await readJsonObject(req);
  const data = body.data ?? {};
  if (typeof data !== 'object' || data === null || Array.isArray(data)) throw new SimulatorError('ERR_SIMULATOR_INVALID_INPUT', 'data: expected an object');
  return [201, core.emit(String(body.type), data as Record<string, unknown>)];
}

async function seedObligations(core: SimulatorCore, req: IncomingMessage): Promise<[number, unknown]> {
  const { count } = await readJsonObject(req);
  if (!(typeof count === 'number' && Number.isSafeInteger(count) && count >= 1 && count <= MAX_SEEDED_OBLIGATIONS)) {
    throw new SimulatorError('ERR_SIMULATOR_INVALID_INPUT', `count: expected an integer 1..${MAX_SEEDED_OBLIGATIONS}`);
  }
  return [201, { added: core.seedObligations(count) }];
}

async function setFault(core: SimulatorCore, req: IncomingMessage): Promise<[number, unknown]> {
  core.faults.set(validateFault(await readJsonObject(req)));
  return [200, { fault: core.faults.current() }];
}

async function resend(core: SimulatorCore, req: Request): Promise<[number, unknown]> {
  const id = req.params.id as string;
  const result = core.sender.resend(id);
  if (!result) throw new SimulatorError('ERR_SIMULATOR_NOT_FOUND', `no event "${id}" was sent (see GET /_simulator/deliveries)`);
  return [201, { ...result.envelope, deliveries: result.deliveries }];
}

/** The control route table, by method and path below {@link CONTROL_PREFIX}. */
const ROUTES: readonly (readonly ['get' | 'post' | 'put' | 'delete', string, ControlRoute])[] = [
  ['get', '/state', state],
  [
    'post',
    '/consents/grant',
    async (core, req) => {
      const body = await readJsonObject(req);
      return [200, core.grant(target(body), grantOptions(body))];
    },
  ],
  ['post', '/consents/revoke', async (core, req) => [200, core.revoke(target(await readJsonObject(req)))]],
  ['post', '/consents/deny', async (core, req) => [200, core.deny(target(await readJsonObject(req)))]],
  [
    'post',
    '/consents/expire',
    async (core, req) => {
      core.expire(target(await readJsonObject(req)));
      return [200, { expired: true }];
    },
  ],
  ['post', '/flows/:configKey/versions', async (core, req) => [201, core.publish(req.params.configKey as string, await readJsonObject(req))]],
  [
    'post',
    '/webhook-endpoints',
    async (core, req) => {
      const { secret: _secret, ...endpoint } = core.sender.register((await readJsonObject(req)) as unknown as WebhookEndpointInput);
      return [201, endpoint];
    },
  ],
  ['get', '/webhook-endpoints', (core) => [200, core.sender.endpoints().map(({ secret: _secret, ...e }) => e)]],
  ['post', '/events', emitEvent],
  ['post', '/events/:id/resend', resend],
  ['get', '/deliveries', (core) => [200, core.sender.timelines()]],
  ['put', '/faults', setFault],
  ['post', '/faults', setFault],
  [
    'delete',
    '/faults',
    (core) => {
      core.faults.clear();
      return [200, { fault: null }];
    },
  ],
  ['post', '/redec/notification-requirements', seedObligations],
];

/**
 * The control surface's route table, mounted below {@link CONTROL_PREFIX} (`/_simulator/…`, JSON bodies):
 *
 * | request | body | effect |
 * |---|---|---|
 * | `GET /_simulator/state` | | customers, Flows, consent states, endpoints, active fault |
 * | `POST /_simulator/consents/grant` | `{userReference, configKey or consentId, ttlMs?, expiresAt?, scopes?}` | grant, emits events |
 * | `POST /_simulator/consents/revoke` | `{userReference, configKey or consentId}` | revoke, emits events |
 * | `POST /_simulator/consents/deny` | `{userReference, configKey or consentId}` | record a refusal, emits `consent_action.created` |
 * | `POST /_simulator/consents/expire` | `{userReference, configKey or consentId}` | expire now (no event) |
 * | `POST /_simulator/flows/{configKey}/versions` | a Flow version (`version` defaults to next, `published` to true) | publish |
 * | `POST /_simulator/webhook-endpoints` | `{url, secret, types?, header?}` | register |
 * | `GET /_simulator/webhook-endpoints` | | registered endpoints, without secrets |
 * | `POST /_simulator/events` | `{type, data?}` | emit any catalog event |
 * | `POST /_simulator/events/{id}/resend` | | deliver a past event again (same id: a replay) |
 * | `GET /_simulator/deliveries` | | delivery timelines |
 * | `PUT` (or `POST`) `/_simulator/faults` / `DELETE /_simulator/faults` | a fault spec | inject / clear |
 * | `POST /_simulator/redec/notification-requirements` | `{count}` (1..100000) | seed `count` pending tenant obligations (no events): volume for the reconciler |
 *
 * With a control token, requests must carry `x-simulator-control-token` (401 `{error:"unauthorized"}`
 * otherwise, before anything else). Any other method (HEAD included) or path: 404 `{error:"not_found"}`;
 * paths are case-sensitive and exact (no trailing slash). Errors are JSON.
 */
export function controlRouter(core: SimulatorCore, controlToken: string | undefined): Router {
  const router = Router({ caseSensitive: true, strict: true });
  router.use((req, res, next) => {
    if (tokenOk(req, controlToken)) next();
    else sendJson(res, 401, { error: 'unauthorized' });
  });
  for (const [method, path, route] of ROUTES) {
    // HEAD first: express would otherwise answer HEAD with the GET route; the control surface has none.
    if (method === 'get') router.head(path, sendNotFound);
    router[method](path, async (req, res) => {
      const [status, body] = await route(core, req);
      sendJson(res, status, body);
    });
  }
  router.use(sendNotFound);
  return router;
}
