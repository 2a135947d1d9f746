import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConsentClient } from '../../src/client/index.js';
import { checkClaimsAfterAll, Contract } from '../helpers/openapi-contract.js';
import { startTestSidecar, type AppResponse, type TestSidecar } from '../helpers/sidecar.js';
import { allow, CHECK_PATH, deny, preDeny, startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { CLAIMS } from './claims.js';

// The batch route and decision ids, held to openapi/consent-sidecar.yaml.

const KEY = 'marketing-email';
const BATCH = '/sidecar/authorization/check-batch';

let up: ScriptedUpstream;
let sidecar: TestSidecar;
/** Strict: no header is excused here, `x-consent-decision-id` included. */
let contract: Contract;
checkClaimsAfterAll(() => contract, CLAIMS['batch-and-ids.contract.test.ts']);

beforeAll(async () => {
  up = await startUpstream();
  up.reply((req) => {
    if (req.url !== CHECK_PATH) return { status: 404, body: {} };
    const { userReference, configKey } = JSON.parse(req.body) as { userReference: string; configKey: string };
    if (userReference === 'alice') return { body: allow(configKey, Date.now() + 3_600_000) };
    if (userReference === 'nobody') return { body: preDeny('customer_not_found') };
    if (userReference === 's500') return { status: 500, body: {} };
    return { body: deny(configKey) };
  });
  sidecar = await startTestSidecar(up.url);
  contract = await Contract.load();
});
afterAll(async () => {
  await sidecar?.close();
  await up?.close();
});

const batch = async (body: unknown): Promise<AppResponse> => {
  const res = await sidecar.send('POST', BATCH, { body: typeof body === 'string' ? body : JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  contract.answer('POST', BATCH, res);
  return res;
};
const item = (userReference: string, configKey = KEY): { userReference: string; configKey: string } => ({ userReference, configKey });

describe('POST /sidecar/authorization/check-batch ⇄ openapi/consent-sidecar.yaml', () => {
  it('200: one result per check in request order, each the single check\'s body plus source and decisionId', async () => {
    const res = await batch({ checks: [item('alice'), item('bob'), item('nobody'), item('s500'), item('alice'), item('alice', 'other-key')] });
    expect(res.status).toBe(200);
    const results = (res.json as { results: Record<string, unknown>[] }).results;
    expect(results.map(({ decisionId: _, ...r }) => r)).toEqual([
      { decision: 'ALLOW', configKey: KEY, validUntil: expect.any(Number), source: expect.stringMatching(/^(upstream|cache)$/) },
      { decision: 'DENY', configKey: KEY, source: 'upstream' },
      { decision: 'DENY', reason: 'customer_not_found', source: 'upstream' },
      { decision: 'DENY', error: 'upstream_5xx', source: 'fail-closed' },
      { decision: 'ALLOW', configKey: KEY, validUntil: expect.any(Number), source: expect.stringMatching(/^(upstream|cache)$/) },
      { decision: 'ALLOW', configKey: 'other-key', validUntil: expect.any(Number), source: 'upstream' },
    ]);
    expect(new Set(results.map((r) => r.decisionId)).size).toBe(results.length);
    // A second batch answers the ALLOWs from the cache.
    const again = ((await batch({ checks: [item('alice')] })).json as { results: Record<string, unknown>[] }).results;
    expect(again[0]).toMatchObject({ decision: 'ALLOW', source: 'cache' });
  });

  it('400 naming the limit or the item\'s index; nothing is decided', async () => {
    const before = up.checks;
    expect((await batch({ checks: [] })).json).toMatchObject({ error: 'invalid_request', field: 'checks' });
    expect((await batch({ checks: Array.from({ length: 101 }, (_, i) => item(`u${i}`)) })).json).toMatchObject({ field: 'checks', detail: expect.stringContaining('100') });
    expect((await batch({ checks: [item('alice'), item('bob'), { userReference: 'carol' }] })).json).toMatchObject({ field: 'checks[2].configKey', index: 2 });
    expect((await batch({ checks: [item('alice'), 'carol'] })).json).toMatchObject({ index: 1 });
    expect((await batch('not json')).json).toMatchObject({ field: 'body' });
    expect((await batch({})).status).toBe(400);
    expect(up.checks).toBe(before);
  });

  it('the TypeScript client reads the real batch answer, each item with its decision id', async () => {
    const client = new ConsentClient({ baseUrl: sidecar.handle.urls.decision });
    const r = await client.checkBatch([item('alice'), item('bob'), item('nobody'), item('s500')]);
    await client.close();
    expect(r.map((x) => [x.allowed, x.kind, x.allowed ? x.configKey : x.cause])).toEqual([
      [true, 'allow', KEY],
      [false, 'deny', 'evaluated'],
      [false, 'deny', 'customer_not_found'],
      [false, 'no_decision', 'upstream_5xx'],
    ]);
    expect(new Set(r.map((x) => x.decisionId)).size).toBe(4);
  });

  it('claims only entries the document has (each is checked as exercised once every test of this file has run)', () => {
    expect(CLAIMS['batch-and-ids.contract.test.ts'].length).toBeGreaterThan(0);
    expect(CLAIMS['batch-and-ids.contract.test.ts'].filter((e) => !contract.entries().includes(e))).toEqual([]);
  });
});

describe('x-consent-decision-id ⇄ openapi/consent-sidecar.yaml', () => {
  it('every check answer carries an id of its own (the contract requires it on 200 and 503)', async () => {
    const ids: string[] = [];
    for (const user of ['alice', 'alice', 'bob', 'nobody', 's500']) {
      const res = await sidecar.check(item(user));
      contract.answer('POST', CHECK_PATH, res);
      ids.push(String(res.headers['x-consent-decision-id']));
    }
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('every forward-auth decision carries an id of its own', async () => {
    const ids: string[] = [];
    for (const user of ['alice', 'bob', 's500']) {
      const res = await sidecar.send('GET', `/sidecar/forward-auth?configKey=${KEY}`, { headers: { 'x-user-reference': user } });
      contract.answer('GET', '/sidecar/forward-auth', res);
      ids.push(String(res.headers['x-consent-decision-id']));
    }
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('the TypeScript client passes each answer\'s id on', async () => {
    const client = new ConsentClient({ baseUrl: sidecar.handle.urls.decision });
    const r = await Promise.all(['alice', 'bob', 's500'].map((u) => client.check(item(u))));
    await client.close();
    expect(r.map((x) => typeof x.decisionId)).toEqual(['string', 'string', 'string']);
  });
});
