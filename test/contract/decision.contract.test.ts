import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAIL_CLOSED_CAUSES } from '../../src/decision/errors.js';
import { checkClaimsAfterAll, Contract } from '../helpers/openapi-contract.js';
import { startTestSidecar, type AppResponse, type TestSidecar } from '../helpers/sidecar.js';
import { allow, CHECK_PATH, deny, preDeny, startUpstream, type Reply, type ScriptedUpstream } from '../helpers/upstream.js';
import { CLAIMS, FORWARD_AUTH_BENEATH_METHODS, FORWARD_AUTH_METHODS, PASSTHROUGH_METHODS, WRONG_CHECK_METHODS } from './claims.js';

// The decision listener's real answers, every status and cause they can be made to give, each held
// to openapi/consent-sidecar.yaml.

const KEY = 'marketing-email';
const far = (): number => Date.now() + 3_600_000;

/** The service's answer to a check, by user reference. */
const BY_USER: Record<string, () => Reply> = {
  alice: () => ({ body: allow(KEY, far()) }),
  bob: () => ({ body: deny(KEY) }),
  nobody: () => ({ body: preDeny('customer_not_found') }),
  reset: () => ({ fault: 'reset' }),
  s500: () => ({ status: 500, body: { error: 'boom' } }),
  s404: () => ({ status: 404, body: { error: 'nope' } }),
  s302: () => ({ status: 302, headers: { location: '/elsewhere' }, body: '' }),
  junk: () => ({ body: 'this is not JSON' }),
  twice: () => ({ body: `{"decision":"DENY","configKey":"${KEY}","decision":"ALLOW","validUntil":${far()}}` }),
  expired: () => ({ body: allow(KEY, Date.now() - 60_000) }),
  hang: () => ({ fault: 'hang' }),
};

function script(up: ScriptedUpstream): void {
  up.reply((req) => {
    if (req.url === CHECK_PATH) {
      const user = (JSON.parse(req.body) as { userReference: string }).userReference;
      return (BY_USER[user] ?? BY_USER.bob!)();
    }
    if (req.url.startsWith('/v1/reset')) return { fault: 'reset' };
    if (req.url.startsWith('/v1/hang')) return { fault: 'hang' };
    return { status: 200, body: { passed: req.url } };
  });
}

let up: ScriptedUpstream;
/** Flags of BASE_FLAGS: a long deadline, a breaker out of the way. */
let main: TestSidecar;
/** A short deadline, for the service that never answers. */
let short: TestSidecar;
/** A breaker that opens on one failure, one call in flight at most, and a Redis nobody answers on. */
let fragile: TestSidecar;
/** One connection to the service and a breaker that opens on one failure: checks wait for that connection. */
let narrow: TestSidecar;
let contract: Contract;
checkClaimsAfterAll(() => contract, CLAIMS['decision.contract.test.ts']);
const causes = new Set<string>();

beforeAll(async () => {
  up = await startUpstream();
  script(up);
  contract = await Contract.load();
  [main, short, fragile, narrow] = await Promise.all([
    startTestSidecar(up.url),
    startTestSidecar(up.url, { 'upstream-timeout-ms': '300', 'passthrough-timeout-ms': '300' }),
    startTestSidecar(up.url, { 'breaker-failure-threshold': '1', 'breaker-cooldown-ms': '600000', 'upstream-max-in-flight': '1', 'redis-url': 'redis://127.0.0.1:1' }),
    startTestSidecar(up.url, { 'breaker-failure-threshold': '1', 'breaker-cooldown-ms': '600000', 'upstream-connections': '1' }),
  ]);
});
afterAll(async () => {
  await Promise.allSettled([main?.close(), short?.close(), fragile?.close(), narrow?.close()]);
  await up?.close();
});

/** Judges one answer and keeps the cause of a 503. */
function judged(method: string, path: string, res: AppResponse, as?: string): AppResponse {
  contract.answer(method, path, res, as);
  if (res.status === 503 && typeof res.json?.error === 'string') causes.add(res.json.error);
  return res;
}

const check = async (s: TestSidecar, userReference: string, headers?: Record<string, string>): Promise<AppResponse> =>
  judged('POST', CHECK_PATH, await s.check({ userReference, configKey: KEY }, headers));

describe('decision listener ⇄ openapi/consent-sidecar.yaml', () => {
  it('check: ALLOW fresh and cached, evaluated and pre-evaluation DENY', async () => {
    expect((await check(main, 'alice')).source).toBe('upstream');
    expect((await check(main, 'alice')).source).toBe('cache');
    expect((await check(main, 'bob')).json).toStrictEqual(deny(KEY));
    expect((await check(main, 'nobody')).json).toStrictEqual(preDeny('customer_not_found'));
  });

  it('check: 400 for bad bodies, 405 for other methods', async () => {
    for (const body of ['not json', '[]', '{"userReference":"a"}', '{"userReference":1,"configKey":"k"}', JSON.stringify({ userReference: 'a', configKey: 'k'.repeat(1025) })]) {
      expect(judged('POST', CHECK_PATH, await main.check(body)).status).toBe(400);
    }
    expect(judged('POST', CHECK_PATH, await main.check('x'.repeat(70_000))).json).toMatchObject({ field: 'body' });
    for (const m of WRONG_CHECK_METHODS) {
      const res = judged(m, CHECK_PATH, await main.send(m, CHECK_PATH));
      expect(res.status).toBe(405);
    }
  });

  it('check: a 503 for every fail-closed cause a test can provoke', async () => {
    for (const user of ['reset', 's500', 's404', 's302', 'junk', 'twice', 'expired']) {
      expect((await check(main, user)).status, user).toBe(503);
    }
    expect((await check(short, 'hang')).json).toMatchObject({ error: 'upstream_timeout' });

    // One call in flight at most: a second miss meanwhile is `overload`.
    let release!: () => void;
    up.enqueue({ hold: new Promise<void>((r) => (release = r)), body: allow(KEY, far()) });
    const seen = up.count;
    const held = fragile.check({ userReference: 'alice', configKey: KEY });
    await up.waitForCount(seen + 1);
    expect((await check(fragile, 'bob')).json).toMatchObject({ error: 'overload' });
    release();
    judged('POST', CHECK_PATH, await held);
    // One failure opens the breaker.
    expect((await check(fragile, 's500')).json).toMatchObject({ error: 'upstream_5xx' });
    expect((await check(fragile, 'bob')).json).toMatchObject({ error: 'circuit_open' });

    // An exception inside the sidecar is the one cause no request can provoke from outside.
    expect([...causes].sort()).toEqual(FAIL_CLOSED_CAUSES.filter((c) => c !== 'internal_error').sort());
  });

  it('overload: a check that cannot be sent in time, on the check, a batch item and forward-auth; the breaker is not told', async () => {
    // One connection, held by one check; no answer timed yet, so the service is reckoned at an
    // eighth of the 5 s deadline and 1 × (8 − 2) checks may wait for the connection.
    const releases: (() => void)[] = [];
    up.enqueue(...Array.from({ length: 7 }, () => ({ hold: new Promise<void>((r) => releases.push(r)), body: allow(KEY, far()) })));
    const seen = up.count;
    const admitted = Array.from({ length: 7 }, (_, i) => narrow.check({ userReference: `admitted-${i}`, configKey: KEY }));
    await up.waitForCount(seen + 1);
    expect((await check(narrow, 'alice')).json).toStrictEqual({ decision: 'DENY', error: 'overload' });
    const batch = judged('POST', '/sidecar/authorization/check-batch', await narrow.send('POST', '/sidecar/authorization/check-batch', { body: JSON.stringify({ checks: [{ userReference: 'alice', configKey: KEY }] }) }));
    expect(batch.json).toMatchObject({ results: [{ decision: 'DENY', error: 'overload', source: 'fail-closed' }] });
    const forward = judged('GET', '/sidecar/forward-auth', await narrow.send('GET', `/sidecar/forward-auth?configKey=${KEY}`, { headers: { 'x-user-reference': 'alice' } }));
    expect([forward.status, forward.headers['x-consent-decision-error']]).toEqual([503, 'overload']);
    for (const r of releases) r();
    for (const a of admitted) expect(judged('POST', CHECK_PATH, await a).json).toMatchObject({ decision: 'ALLOW' });
    // The breaker opens on one failure here: the overloads were none.
    expect((await check(narrow, 'alice')).json).toMatchObject({ decision: 'ALLOW' });
  });

  it('forward-auth: 200, 403, 503 and 400 for every method, on the bare path and beneath it', async () => {
    const ask = async (m: string, path: string, user: string | undefined): Promise<AppResponse> =>
      judged(m, path, await main.send(m, path, { headers: { ...(user ? { 'x-user-reference': user } : {}), 'x-consent-config-key': KEY } }));
    for (const [methods, path] of [
      [FORWARD_AUTH_METHODS, `/sidecar/forward-auth?configKey=${KEY}`],
      [FORWARD_AUTH_BENEATH_METHODS, '/sidecar/forward-auth/orders/42'],
    ] as const) {
      for (const m of methods) {
        expect((await ask(m, path, 'alice')).status).toBe(200);
        expect((await ask(m, path, 'bob')).headers['x-consent-deny-reason']).toBe('evaluated');
        expect((await ask(m, path, 's500')).headers['x-consent-decision-error']).toBe('upstream_5xx');
        expect((await ask(m, path, undefined)).status).toBe(400);
      }
    }
    expect((await ask('GET', '/sidecar/forward-auth', 'nobody')).headers['x-consent-deny-reason']).toBe('customer_not_found');
  });

  it('passthrough: the service\'s answer, 400 for a target it will not send, 502 and 504', async () => {
    for (const m of PASSTHROUGH_METHODS) {
      const body = m === 'POST' ? { body: '{}', headers: { 'content-type': 'application/json' } } : {};
      expect(judged(m, '/v1/customers/c-1/consent-compliance', await main.send(m, '/v1/customers/c-1/consent-compliance?template=t', body)).json).toMatchObject({ passed: expect.any(String) });
      expect(judged(m, '/v1/a/../b', await main.send(m, '/v1/a/../b', body), '/v1/{operation}').json).toMatchObject({ problem: 'dot_segment' });
      expect(judged(m, '/v1/reset', await main.send(m, '/v1/reset', body)).status).toBe(502);
      expect(judged(m, '/v1/hang', await short.send(m, '/v1/hang', body)).status).toBe(504);
    }
  });

  it('cache purge: 200, 400, and 503 when the other replicas cannot be told', async () => {
    await check(main, 'alice');
    expect(judged('DELETE', '/sidecar/cache', await main.send('DELETE', '/sidecar/cache?userReference=alice')).json).toEqual({ purged: 1 });
    expect(judged('DELETE', '/sidecar/cache', await main.send('DELETE', '/sidecar/cache')).status).toBe(200);
    expect(judged('DELETE', '/sidecar/cache', await main.send('DELETE', '/sidecar/cache?userReference=a&userReference=b')).status).toBe(400);
    expect(judged('DELETE', '/sidecar/cache', await fragile.send('DELETE', '/sidecar/cache')).json).toMatchObject({ error: 'revocation_not_shared' });
  });

  it('404 for a target no route takes', async () => {
    expect(judged('GET', '/nothing/here', await main.send('GET', '/nothing/here')).status).toBe(404);
    expect(judged('GET', '/sidecar/other', await main.send('GET', '/sidecar/other'), '/{anyOtherPath}').status).toBe(404);
  });

  it('claims only entries the document has (each is checked as exercised once every test of this file has run)', () => {
    expect(CLAIMS['decision.contract.test.ts'].length).toBeGreaterThan(0);
    expect(CLAIMS['decision.contract.test.ts'].filter((e) => !contract.entries().includes(e))).toEqual([]);
  });
});
