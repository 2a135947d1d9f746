import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatorHandle } from '../../src/simulator/index.js';

/**
 * The simulator's routing answers JSON for every path and method, never a framework's HTML: each
 * row is what the hand-written router answered before the route tables moved onto express.
 */
let sim: SimulatorHandle;
beforeAll(async () => {
  sim = await startSimulator({ apiKey: 'k_route', controlToken: 'tok' });
});
afterAll(() => sim.close());

const SERVICE = { authorization: 'Bearer k_route' };
const CONTROL = { 'x-simulator-control-token': 'tok' };
const NOT_FOUND = { error: 'not_found' };
const NOT_ALLOWED = { error: 'method_not_allowed' };

const ROWS: [string, string, Record<string, string>, number, unknown, string?][] = [
  ['GET', '/v1/authorization/check', SERVICE, 405, NOT_ALLOWED, 'POST'],
  ['OPTIONS', '/v1/authorization/check', SERVICE, 405, NOT_ALLOWED, 'POST'],
  ['HEAD', '/v1/authorization/check', SERVICE, 405, undefined, 'POST'],
  ['POST', '/v1/redec/notification-requirements', SERVICE, 405, NOT_ALLOWED, 'GET'],
  ['HEAD', '/v1/redec/notification-requirements', SERVICE, 405, undefined, 'GET'],
  ['GET', '/v1/redec/consents/rdc_x/notification-evidence', SERVICE, 405, NOT_ALLOWED, 'POST'],
  ['POST', '/v1/authorization/check/', SERVICE, 404, NOT_FOUND],
  ['POST', '/v1/Authorization/check', SERVICE, 404, NOT_FOUND],
  ['GET', '/v1/embed/sessions/', SERVICE, 404, NOT_FOUND],
  ['DELETE', '/v1/embed/sessions', SERVICE, 501, { error: 'not_simulated', detail: '/v1/embed/sessions is referenced by the interface document without a shape' }],
  ['GET', '/v1/nothing', {}, 401, { error: 'unauthorized' }],
  ['GET', '/v1', {}, 404, NOT_FOUND],
  ['GET', '/v1/', {}, 401, { error: 'unauthorized' }],
  ['GET', '/V1/authorization/check', SERVICE, 404, NOT_FOUND],
  ['GET', '/', {}, 404, NOT_FOUND],
  ['GET', '/_simulator', {}, 404, NOT_FOUND],
  ['GET', '/_simulator/state', {}, 401, { error: 'unauthorized' }],
  ['GET', '/_simulator/nothing', {}, 401, { error: 'unauthorized' }],
  ['HEAD', '/_simulator/state', CONTROL, 404, undefined],
  ['OPTIONS', '/_simulator/state', CONTROL, 404, NOT_FOUND],
  ['GET', '/_simulator/state/', CONTROL, 404, NOT_FOUND],
  ['GET', '/_simulator/State', CONTROL, 404, NOT_FOUND],
  ['GET', '/_simulator/flows/marketing-email/versions', CONTROL, 404, NOT_FOUND],
  ['PATCH', '/_simulator/faults', CONTROL, 404, NOT_FOUND],
];

describe('routing', () => {
  it.each(ROWS)('%s %s answers %#', async (method, path, headers, status, body, allow) => {
    const res = await fetch(`${sim.url}${path}`, { method, headers });
    expect(res.status).toBe(status);
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(res.headers.get('allow')).toBe(allow ?? null);
    expect(res.headers.get('x-powered-by')).toBeNull();
    expect(res.headers.get('etag')).toBeNull();
    if (body !== undefined) expect(await res.json()).toStrictEqual(body);
  });

  it('a malformed JSON body is 400 with the problem, before any route effect', async () => {
    const res = await fetch(`${sim.url}/_simulator/consents/grant`, { method: 'POST', headers: CONTROL, body: '{' });
    expect(res.status).toBe(400);
    expect(await res.json()).toStrictEqual({ error: 'ERR_SIMULATOR_INVALID_INPUT', problems: ['body is not JSON'] });
  });

  it('dot segments resolve before matching, as a URL parser resolves them', async () => {
    const { request } = await import('node:http');
    const url = new URL(sim.url);
    const status = await new Promise<number | undefined>((resolve, reject) => {
      const req = request({ host: url.hostname, port: url.port, method: 'GET', path: '/v1/x/../redec/notification-requirements', headers: SERVICE }, (res) => {
        res.resume();
        resolve(res.statusCode);
      });
      req.on('error', reject);
      req.end();
    });
    expect(status).toBe(200);
  });

  it('a path parameter that does not decode (%zz) is the request\'s fault: 400, JSON', async () => {
    for (const [method, path, headers] of [
      ['POST', '/v1/redec/consents/%zz/notification-evidence', SERVICE],
      ['POST', '/_simulator/flows/%zz/versions', CONTROL],
    ] as const) {
      const r = await fetch(`${sim.url}${path}`, { method, headers: { ...headers, 'content-type': 'application/json' }, body: '{}' });
      expect(r.status, path).toBe(400);
      expect(r.headers.get('content-type')).toMatch(/^application\/json/);
      expect(((await r.json()) as { error: string }).error).toBe('ERR_SIMULATOR_INVALID_INPUT');
    }
  });
});
