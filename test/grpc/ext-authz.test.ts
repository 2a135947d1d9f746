import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startTestSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { checkRequest, CheckRequestType, GrpcClient, headersOf, metadataOf, type CheckResponse } from '../helpers/grpc.js';
import { allow, CHECK_PATH, deny, preDeny, startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { PATIENTLY } from '../helpers/wait.js';

// envoy.service.auth.v3.Authorization/Check on a real sidecar (--grpc-listen), asked by a grpc-js
// client built from the sidecar's own .proto files, in front of a scripted consent service.

const KEY = 'marketing-email';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

let upstream: ScriptedUpstream | undefined;
let sidecar: TestSidecar | undefined;
let client: GrpcClient | undefined;
let dir: string | undefined;

afterEach(async () => {
  client?.close();
  await sidecar?.close();
  await upstream?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  [client, sidecar, upstream, dir] = [undefined, undefined, undefined, undefined];
});

async function start(flags: Record<string, string> = {}): Promise<{ u: ScriptedUpstream; s: TestSidecar; c: GrpcClient }> {
  upstream = await startUpstream();
  sidecar = await startTestSidecar(upstream.url, { 'grpc-listen': '127.0.0.1:0', ...flags });
  client = new GrpcClient(sidecar.handle.urls.grpc!);
  return { u: upstream, s: sidecar, c: client };
}

/** A reply that is a successful gRPC call: the transport's status OK. */
function reply(r: { res?: CheckResponse; err?: unknown }): CheckResponse {
  expect(r.err).toBeUndefined();
  return r.res!;
}

const asked = (u: ScriptedUpstream): unknown[] => u.requests.filter((r) => r.url === CHECK_PATH).map((r) => JSON.parse(r.body) as unknown);

describe('gRPC ext_authz answers (TCP)', () => {
  it('ALLOW: status 0 with ok_response adding x-consent-valid-until and x-consent-decision-id, and the dynamic metadata; then from the cache', async () => {
    const { u, s, c } = await start();
    const validUntil = Date.now() + 60_000;
    u.reply({ body: allow(KEY, validUntil) });
    const first = reply(await c.check(checkRequest({ 'x-user-reference': 'alice' }, { configKey: KEY })));
    expect(first.status?.code ?? 0).toBe(0);
    expect(first.http_response).toBe('ok_response');
    const h = headersOf(first);
    expect(h['x-consent-valid-until']).toBe(String(validUntil));
    expect(h['x-consent-decision-id']).toMatch(UUID);
    // The client's own copies of these headers are replaced, never kept beside ours.
    expect(first.ok_response!.headers!.every((o) => o.append_action === 'OVERWRITE_IF_EXISTS_OR_ADD')).toBe(true);
    expect(metadataOf(first)).toEqual({ decision: 'ALLOW', source: 'upstream', validUntil, decisionId: h['x-consent-decision-id'] });

    const second = reply(await c.check(checkRequest({ 'x-user-reference': 'alice', 'x-consent-config-key': KEY })));
    expect(second.status?.code ?? 0).toBe(0);
    expect(metadataOf(second)).toMatchObject({ decision: 'ALLOW', source: 'cache', validUntil });
    expect(headersOf(second)['x-consent-decision-id']).not.toBe(h['x-consent-decision-id']);
    expect(asked(u)).toEqual([{ userReference: 'alice', configKey: KEY }]);
    expect(await s.metric('consent_sidecar_decisions_total', { decision: 'allow', route: 'ext_authz_grpc' })).toBe(2);
    expect(await s.metric('consent_sidecar_decisions_total', { route: 'forward_auth' })).toBe(0);
  });

  it('evaluated DENY: PERMISSION_DENIED, denied 403 with x-consent-deny-reason evaluated, never cached', async () => {
    const { u, s, c } = await start();
    u.reply({ body: deny(KEY) });
    for (let i = 0; i < 2; i++) {
      const r = reply(await c.check(checkRequest({ 'x-user-reference': 'bob' }, { configKey: KEY })));
      expect(r.status?.code).toBe(7);
      expect(r.http_response).toBe('denied_response');
      expect(r.denied_response!.status!.code).toBe('Forbidden');
      expect(headersOf(r)).toMatchObject({ 'x-consent-deny-reason': 'evaluated', 'x-consent-decision-source': 'upstream' });
      expect(headersOf(r)['x-consent-decision-id']).toMatch(UUID);
      expect(r.denied_response!.body).toBe('deny: evaluated\n');
      expect(metadataOf(r)).toMatchObject({ decision: 'DENY', reason: 'evaluated' });
    }
    expect(u.checks).toBe(2);
    expect(await s.metric('consent_sidecar_decisions_total', { decision: 'deny', source: 'upstream', route: 'ext_authz_grpc' })).toBe(2);
  });

  it('pre-evaluation DENY: PERMISSION_DENIED, 403 with the reason, counted and logged as a pre-evaluation denial', async () => {
    const { u, s, c } = await start();
    u.reply({ body: preDeny('customer_not_found') });
    const r = reply(await c.check(checkRequest({ 'x-user-reference': 'nobody' }, { configKey: KEY })));
    expect(r.status?.code).toBe(7);
    expect(r.denied_response!.status!.code).toBe('Forbidden');
    expect(headersOf(r)['x-consent-deny-reason']).toBe('customer_not_found');
    expect(await s.metric('consent_sidecar_pre_evaluation_denials_total', { reason: 'customer_not_found' })).toBe(1);
  });

  it('the user header is read case-insensitively, from header_map (raw_value) too, and as UTF-8', async () => {
    const { u, c } = await start();
    u.reply((req) => ({ body: allow(KEY, Date.now() + 60_000), headers: { 'x-asked': JSON.parse(req.body).userReference as string } }));
    const viaMap = checkRequest({}, { configKey: KEY });
    (viaMap.attributes as { request: { http: Record<string, unknown> } }).request.http.header_map = { headers: [{ key: 'x-user-reference', raw_value: Buffer.from('ålice') }] };
    expect(reply(await c.check(viaMap)).status?.code ?? 0).toBe(0);
    expect(reply(await c.check(checkRequest({ 'X-User-Reference': 'bob' }, { configKey: KEY }))).status?.code ?? 0).toBe(0);
    expect(asked(u)).toEqual([{ userReference: 'ålice', configKey: KEY }, { userReference: 'bob', configKey: KEY }]);
  });

  const bad: [string, Record<string, string>, Record<string, string>, RegExp][] = [
    ['no user header', {}, { configKey: KEY }, /userReference is missing/],
    ['an empty user header', { 'x-user-reference': '' }, { configKey: KEY }, /userReference is missing/],
    ['no configKey', { 'x-user-reference': 'alice' }, {}, /configKey is missing/],
    ['context extension and header differ', { 'x-user-reference': 'alice', 'x-consent-config-key': 'other' }, { configKey: KEY }, /differ/],
    ['the user header twice (two spellings of one name)', { 'x-user-reference': 'alice', 'X-USER-REFERENCE': 'mallory' }, { configKey: KEY }, /more than once/],
    ['a user reference longer than 1024 characters', { 'x-user-reference': 'a'.repeat(1025) }, { configKey: KEY }, /longer than 1024/],
  ];

  it.each(bad)('%s: INVALID_ARGUMENT, denied 400, the service not asked, counted as rejected', async (_what, headers, extensions, detail) => {
    const { u, s, c } = await start();
    u.reply({ body: allow(KEY, Date.now() + 60_000) });
    const r = reply(await c.check(checkRequest(headers, extensions)));
    expect(r.status?.code).toBe(3);
    expect(r.status?.message).toMatch(detail);
    expect(r.denied_response!.status!.code).toBe('BadRequest');
    expect(headersOf(r)).toMatchObject({ 'x-consent-decision-error': 'invalid_request', 'x-consent-decision-source': 'rejected' });
    expect(headersOf(r)['x-consent-decision-id']).toMatch(UUID);
    expect(u.checks).toBe(0);
    expect(await s.metric('consent_sidecar_decisions_total', { source: 'rejected', route: 'ext_authz_grpc' })).toBe(1);
  });

  it('the user header repeated in header_map, or map entries repeated on the wire: 400', async () => {
    const { u, c } = await start();
    const repeated = checkRequest({}, { configKey: KEY });
    (repeated.attributes as { request: { http: Record<string, unknown> } }).request.http.header_map = {
      headers: [{ key: 'x-user-reference', raw_value: Buffer.from('alice') }, { key: 'x-user-reference', raw_value: Buffer.from('mallory') }],
    };
    const r1 = reply(await c.check(repeated));
    expect(r1.status?.code).toBe(3);
    expect(r1.status?.message).toMatch(/more than once/);
    // Two `headers` map entries for one key: an encoder never writes that, a reader keeping the last would pick one.
    const one = Buffer.from(CheckRequestType().encode(checkRequest({ 'x-user-reference': 'alice' }, { configKey: KEY })).finish());
    const two = Buffer.from(CheckRequestType().encode(checkRequest({ 'x-user-reference': 'mallory' })).finish());
    const r2 = reply(await c.checkRaw(Buffer.concat([one, two])));
    expect(r2.status?.code).toBe(3);
    expect(r2.status?.message).toMatch(/more than once/);
    expect(u.checks).toBe(0);
  });

  it('a message larger than --grpc-max-message-bytes: a successful 400 denial, nothing read', async () => {
    const { u, c } = await start({ 'grpc-max-message-bytes': '2048' });
    const r = reply(await c.check(checkRequest({ 'x-user-reference': 'alice', 'x-padding': 'p'.repeat(4096) }, { configKey: KEY })));
    expect(r.status?.code).toBe(3);
    expect(r.status?.message).toMatch(/larger than 2048 bytes/);
    expect(u.checks).toBe(0);
  });

  it('decision log lines with route ext_authz_grpc and the answer\'s decision id', async () => {
    dir = mkdtempSync(join(tmpdir(), 'grpc-log-'));
    const file = join(dir, 'decisions.log');
    const { u, c } = await start({ 'decision-log': file });
    u.reply({ body: allow(KEY, Date.now() + 60_000) });
    const r = reply(await c.check(checkRequest({ 'x-user-reference': 'alice' }, { configKey: KEY })));
    const id = headersOf(r)['x-consent-decision-id'];
    const lines = (): Record<string, unknown>[] => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>) : []);
    await vi.waitFor(() => expect(lines()).toHaveLength(1), PATIENTLY);
    expect(lines()[0]).toMatchObject({ event: 'decision', route: 'ext_authz_grpc', decisionId: id, configKey: KEY, decision: 'allow' });
    expect(readFileSync(file, 'utf8')).not.toContain('alice');
  });

  it('a client that cancels mid-call: no crash, the decision counted once, the next call answered', async () => {
    const { u, s, c } = await start();
    let release = (): void => undefined;
    const held = new Promise<void>((r) => (release = r));
    u.reply({ hold: held, body: allow(KEY, Date.now() + 60_000) });
    const call = c.authz.Check(checkRequest({ 'x-user-reference': 'carol' }, { configKey: KEY }), new (await import('@grpc/grpc-js')).Metadata(), {}, () => undefined);
    await u.waitForCount(1);
    call.cancel();
    release();
    await vi.waitFor(async () => expect(await s.metric('consent_sidecar_decisions_total', { route: 'ext_authz_grpc' })).toBe(1), PATIENTLY);
    const next = reply(await c.check(checkRequest({ 'x-user-reference': 'carol' }, { configKey: KEY })));
    expect(next.status?.code ?? 0).toBe(0);
    expect(metadataOf(next).source).toBe('cache');
    expect(await s.metric('consent_sidecar_decisions_total', { route: 'ext_authz_grpc' })).toBe(2);
  });

  it('health: Check says SERVING for the server and the ext_authz service, NOT_FOUND for another', async () => {
    const { c } = await start();
    expect(await c.healthCheck('')).toEqual({ status: 'SERVING' });
    expect(await c.healthCheck('envoy.service.auth.v3.Authorization')).toEqual({ status: 'SERVING' });
    expect((await c.healthCheck('something.Else')).err?.code).toBe(GrpcStatus.NOT_FOUND);
  });
});

describe('gRPC ext_authz on a Unix socket', () => {
  it('answers ALLOW and DENY over unix:/path, the socket created with mode 0666', async () => {
    dir = mkdtempSync(join(tmpdir(), 'grpc-sock-'));
    const path = join(dir, 'grpc.sock');
    const { u, c } = await start({ 'grpc-listen': `unix:${path}` });
    expect(c.target).toBe(`unix:${path}`);
    const { statSync } = await import('node:fs');
    expect(statSync(path).mode & 0o777).toBe(0o666);
    u.reply((req) => ((JSON.parse(req.body) as { userReference: string }).userReference === 'alice' ? { body: allow(KEY, Date.now() + 60_000) } : { body: deny(KEY) }));
    expect(reply(await c.check(checkRequest({ 'x-user-reference': 'alice' }, { configKey: KEY }))).status?.code ?? 0).toBe(0);
    expect(reply(await c.check(checkRequest({ 'x-user-reference': 'bob' }, { configKey: KEY }))).status?.code).toBe(7);
  });
});
