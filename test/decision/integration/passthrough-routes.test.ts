import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startTestSidecar, type TestSidecar } from '../../helpers/sidecar.js';
import { allow, startUpstream, type Reply, type ScriptedUpstream } from '../../helpers/upstream.js';
import { PATIENTLY } from '../../helpers/wait.js';

// Other /v1/* requests pass through with the key injected; spellings of the check path never do;
// the API key is a Bearer token that follows its file.

const KEY = 'flow-pass';

let upstream: ScriptedUpstream | undefined;
let sidecar: TestSidecar | undefined;
let dir: string | undefined;

afterEach(async () => {
  await sidecar?.close();
  await upstream?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  sidecar = undefined;
  upstream = undefined;
  dir = undefined;
});

async function setup(reply: Reply, flags: Record<string, string> = {}): Promise<{ u: ScriptedUpstream; s: TestSidecar }> {
  upstream = await startUpstream(reply);
  sidecar = await startTestSidecar(upstream.url, flags);
  return { u: upstream, s: sidecar };
}

describe('passthrough of other /v1/* requests', () => {
  it('GET reaches the service with the key as Bearer (the app\'s own authorization replaced), and the answer comes back as is', async () => {
    const { u, s } = await setup({ status: 418, headers: { 'x-service-thing': 'v1', etag: '"abc"' }, body: 'short and stout' });
    const r = await s.send('GET', '/v1/customers/c-42/consent-compliance?template=t1&x=%20y', {
      headers: { authorization: 'Bearer app-own-token', 'x-app-trace': 'trace-1', accept: 'text/plain' },
    });
    expect(r.status).toBe(418);
    expect(r.text).toBe('short and stout');
    expect(r.headers['x-service-thing']).toBe('v1');
    expect(r.headers.etag).toBe('"abc"');
    // Was toBeUndefined: every answer of the decision listener now says where it came from (issue 13).
    expect(r.headers['x-consent-decision-source']).toBe('upstream');
    expect(u.requests).toHaveLength(1);
    const seen = u.requests[0]!;
    expect(seen.method).toBe('GET');
    expect(seen.url).toBe('/v1/customers/c-42/consent-compliance?template=t1&x=%20y');
    expect(seen.headers.authorization).toBe('Bearer test-api-key');
    expect(seen.headers['x-app-trace']).toBe('trace-1');
    expect(seen.headers.accept).toBe('text/plain');
  });

  it('POST forwards the body unchanged and returns the status and body unchanged', async () => {
    const { u, s } = await setup({ status: 201, body: '{"recorded":true,  "id":"e-1"}' });
    const body = '{"evidence":"sent by mail",\n "at":1}';
    const r = await s.send('POST', '/v1/redec/consents/rc-9/notification-evidence', { body, headers: { 'content-type': 'application/json' } });
    expect(r.status).toBe(201);
    expect(r.text).toBe('{"recorded":true,  "id":"e-1"}');
    expect(u.requests[0]!.body).toBe(body);
    expect(u.requests[0]!.method).toBe('POST');
    expect(u.requests[0]!.headers.authorization).toBe('Bearer test-api-key');
  });

  it('a 5xx of the service is returned as is (the passthrough does not fail closed into a DENY shape)', async () => {
    const { s } = await setup({ status: 503, body: '{"error":"maintenance"}' });
    const r = await s.send('GET', '/v1/redec/notification-requirements?status=pending');
    expect(r.status).toBe(503);
    expect(r.text).toBe('{"error":"maintenance"}');
  });

  it('is never cached: two identical calls are two upstream hits', async () => {
    const { u, s } = await setup({ body: allow(KEY, Date.now() + 60_000) });
    await s.send('GET', '/v1/redec/notification-requirements?status=pending');
    await s.send('GET', '/v1/redec/notification-requirements?status=pending');
    expect(u.count).toBe(2);
  });

  // A retry would be sent before the 502 is written (the 502 is the passthrough giving up), and the
  // service records a request before it resets it: once the 502 is here, a retry would already be
  // counted. No wait is needed to see that none came.
  it('is never retried: a reset → 502 and the service saw exactly one attempt (single-use operations)', async () => {
    const { u, s } = await setup({ fault: 'reset' });
    const r = await s.send('POST', '/v1/redec/accesses/authorize', { body: '{"accessId":"a-1"}', headers: { 'content-type': 'application/json' } });
    expect(r.status).toBe(502);
    expect(u.count).toBe(1);
  });

  it('is never retried on a GET either', async () => {
    const { u, s } = await setup({ fault: 'reset' });
    const r = await s.send('GET', '/v1/redec/notification-requirements?status=pending');
    expect(r.status).toBe(502);
    expect(u.count).toBe(1);
  });

  it('times out with 504 after --passthrough-timeout-ms', async () => {
    // The service never answers: a 504 at all is the passthrough deadline's doing (was: within 1.5 s,
    // a timing bound that a busy machine broke).
    const { s } = await setup({ fault: 'hang' }, { 'passthrough-timeout-ms': '200' });
    const r = await s.send('GET', '/v1/redec/notification-requirements');
    expect(r.status).toBe(504);
    expect(r.json).toEqual({ error: 'upstream_timeout' });
  });

  it('does not touch the ALLOW cache or the decision metrics', async () => {
    const { s } = await setup({ body: allow(KEY, Date.now() + 60_000) });
    await s.send('POST', '/v1/redec/accesses/authorize', { body: JSON.stringify({ userReference: 'u', configKey: KEY }) });
    expect(await s.metric('consent_sidecar_cache_entries')).toBe(0);
    expect(await s.metric('consent_sidecar_decisions_total')).toBe(0);
  });

  it('paths outside /v1/ are not passed through (404, the service is not called)', async () => {
    const { u, s } = await setup({ body: 'x' });
    for (const path of ['/', '/v2/authorization/check', '/admin', '/v1']) {
      const r = await s.send('GET', path);
      expect(r.status).toBe(404);
    }
    expect(u.count).toBe(0);
  });
});

describe('spellings of the check path take the strict route, never the passthrough', () => {
  const variants = [
    '/v1/authorization/check?x=1',
    '/v1/authorization/check/',
    '/v1/authorization//check',
    '/v1//authorization/check',
    '/v1/Authorization/check',
    '/V1/AUTHORIZATION/CHECK',
    '/v1/authorization/%63heck',
    '/v1/authorization/check%2F',
    '/v1/%61uthorization/check',
    '/v1/./authorization/check',
    '/v1/x/../authorization/check',
    '/v1/authorization/check/.',
    '/v1/x/%2e%2e/authorization/check',
  ];

  it.each(variants)('%s: a malformed upstream ALLOW through it is still a 503', async (path) => {
    const { u, s } = await setup({ body: { decision: 'ALLOW', configKey: KEY } }); // no validUntil
    const r = await s.send('POST', path, { body: JSON.stringify({ userReference: 'u', configKey: KEY }) });
    expect(r.status).toBe(503);
    expect(r.source).toBe('fail-closed');
    expect(r.json).toEqual({ decision: 'DENY', error: 'malformed_response' });
    // The strict route sends the canonical path, never the app's spelling.
    expect(u.requests.map((q) => q.url)).toEqual(['/v1/authorization/check']);
  });

  it.each(variants)('%s: a bad request through it is a 400 and the service is not called', async (path) => {
    const { u, s } = await setup({ body: allow(KEY, Date.now() + 60_000) });
    const r = await s.send('POST', path, { body: JSON.stringify({ userReference: 'u' }) });
    expect(r.status).toBe(400);
    expect(r.source).toBe('rejected');
    expect(u.count).toBe(0);
  });

  it('a protocol-relative spelling (//v1/authorization/check) is not passed through', async () => {
    const { u, s } = await setup({ body: { decision: 'ALLOW', configKey: KEY } });
    const r = await s.send('POST', '//v1/authorization/check', { body: JSON.stringify({ userReference: 'u', configKey: KEY }) });
    expect(r.json?.decision).not.toBe('ALLOW');
    expect(r.status).not.toBe(200);
    expect(u.requests.filter((q) => q.url !== '/v1/authorization/check')).toEqual([]);
  });

  it.each(['GET', 'PUT', 'DELETE', 'PATCH'])('%s on the check path → 405 DENY, the service is not called', async (method) => {
    const { u, s } = await setup({ body: allow(KEY, Date.now() + 60_000) });
    const r = await s.send(method, '/v1/authorization/check');
    expect(r.status).toBe(405);
    expect(r.source).toBe('rejected');
    expect(r.headers.allow).toBe('POST');
    expect(r.json).toMatchObject({ decision: 'DENY', error: 'invalid_request' });
    const v = await s.send(method, '/v1/Authorization/check/');
    expect(v.status).toBe(405);
    expect(v.headers.allow).toBe('POST');
    expect(u.count).toBe(0);
  });
});

describe('x-consent-decision-source on every answer of the decision listener', () => {
  // The cache purge is not a decision: it carries no source (it used to say `rejected`, which it is
  // not); its refusal is one, and says so.
  it('404, 400, the purge\'s refusal and passthrough answers carry it too; the purge itself carries none', async () => {
    const { s } = await setup({ status: 418, body: 'teapot' });
    const cases: [string, string, string | undefined, number, string | undefined][] = [
      ['GET', '/nope', undefined, 404, 'rejected'],
      ['GET', '/v1/%2e%2e/x', undefined, 400, 'rejected'],
      ['DELETE', '/sidecar/cache', undefined, 200, undefined],
      ['DELETE', '/sidecar/cache?userReference=', undefined, 400, 'rejected'],
      ['GET', '/v1/customers/c-1', undefined, 418, 'upstream'],
      ['POST', '/v1/authorization/check', '{"userReference":1}', 400, 'rejected'],
    ];
    for (const [method, path, body, status, source] of cases) {
      const r = await s.send(method, path, body === undefined ? {} : { body });
      expect([method, path, r.status, r.source]).toEqual([method, path, status, source]);
    }
  });

  it('a passthrough the service does not answer is marked fail-closed', async () => {
    const { s } = await setup({ fault: 'reset' });
    const r = await s.send('GET', '/v1/customers/c-1');
    expect(r.status).toBe(502);
    expect(r.source).toBe('fail-closed');
  });
});

describe('the API key', () => {
  it('is sent as Bearer on checks and follows a rotated --api-key-file', async () => {
    dir = mkdtempSync(join(tmpdir(), 'sidecar-key-'));
    const file = join(dir, 'api-key');
    writeFileSync(file, 'key-one\n');
    upstream = await startUpstream({ body: { decision: 'DENY', configKey: KEY } });
    sidecar = await startTestSidecar(upstream.url, { 'api-key': undefined, 'api-key-file': file, 'secret-poll-interval-ms': '100' });
    const req = { userReference: 'u', configKey: KEY };
    await sidecar.check(req);
    expect(upstream.requests[0]!.headers.authorization).toBe('Bearer key-one');

    // Rotate the way a mounted Secret does: a new file swapped in atomically.
    writeFileSync(join(dir, 'next'), 'key-two\n');
    renameSync(join(dir, 'next'), file);
    await vi.waitFor(async () => {
      await sidecar!.check(req);
      expect(upstream!.requests.at(-1)!.headers.authorization).toBe('Bearer key-two');
    }, PATIENTLY);
    await sidecar.send('GET', '/v1/redec/notification-requirements');
    expect(upstream.requests.at(-1)!.headers.authorization).toBe('Bearer key-two');
  });

  it('an invalid rotated key file keeps the last good key', async () => {
    dir = mkdtempSync(join(tmpdir(), 'sidecar-key-'));
    const file = join(dir, 'api-key');
    writeFileSync(file, 'key-one');
    upstream = await startUpstream({ body: { decision: 'DENY', configKey: KEY } });
    sidecar = await startTestSidecar(upstream.url, { 'api-key': undefined, 'api-key-file': file, 'secret-poll-interval-ms': '100' });
    writeFileSync(file, '   \n');
    // The re-read that would have taken the blank key is the one counted as failed: wait for it.
    await vi.waitFor(async () => expect(await sidecar!.metric('consent_sidecar_secret_reload_failures_total', { secret: 'api_key' })).toBeGreaterThanOrEqual(1), PATIENTLY);
    await sidecar.check({ userReference: 'u', configKey: KEY });
    expect(upstream.requests.at(-1)!.headers.authorization).toBe('Bearer key-one');
  });
});
