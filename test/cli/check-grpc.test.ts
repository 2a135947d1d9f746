import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Server, ServerCredentials, type ServerUnaryCall, type sendUnaryData } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUTHORIZATION_SERVICE } from '../../src/grpc/listener.js';
import { runCli } from '../helpers/cli.js';
import { CheckRequestType, CheckResponseType } from '../helpers/grpc.js';
import { freePort } from '../helpers/ports.js';
import { startTestSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { decisionsByUser, startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

// `check --grpc HOST:PORT|unix:PATH`: the gRPC ext_authz listener asked as Envoy asks it, printed and
// exited as the HTTP check is (0 ALLOW, 1 DENY, 2 no decision). The CheckRequests the sidecar got
// are read back with protobufjs from the .proto files, independently of our encoder.

const KEY = 'marketing-email';
const dir = mkdtempSync(join(tmpdir(), 'check-grpc-'));
let up: ScriptedUpstream;
let tcp: TestSidecar;
let unix: TestSidecar;
let fake: Server;
let fakeTarget: string;
let fakeAnswer: Record<string, unknown> = {};
const seen: Record<string, unknown>[] = [];

beforeAll(async () => {
  up = await startUpstream();
  up.reply(decisionsByUser(KEY));
  [tcp, unix] = await Promise.all([
    startTestSidecar(up.url, { 'grpc-listen': '127.0.0.1:0' }),
    startTestSidecar(up.url, { 'grpc-listen': `unix:${join(dir, 'grpc.sock')}`, 'forward-auth-user-header': 'x-customer' }),
  ]);
  // A listener that answers whatever it is told, and records what it was asked.
  fake = new Server();
  fake.addService(AUTHORIZATION_SERVICE, {
    Check: (call: ServerUnaryCall<Buffer, Buffer>, done: sendUnaryData<Buffer>) => {
      seen.push(CheckRequestType().toObject(CheckRequestType().decode(call.request), { defaults: false }) as Record<string, unknown>);
      done(null, Buffer.from(CheckResponseType().encode(CheckResponseType().fromObject(fakeAnswer)).finish()));
    },
  });
  const port = await new Promise<number>((resolve, reject) => fake.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
  fakeTarget = `127.0.0.1:${port}`;
}, 60_000);
afterAll(async () => {
  await Promise.allSettled([tcp?.close(), unix?.close()]);
  await up?.close();
  fake?.forceShutdown();
  rmSync(dir, { recursive: true, force: true });
});

const check = (target: string, user: string, extra: string[] = []) => runCli(['check', '--user-reference', user, '--config-key', KEY, '--grpc', target, ...extra]);

describe('check --grpc', () => {
  it('ALLOW (exit 0), DENY (exit 1), a pre-evaluation DENY (exit 1), no decision (exit 2): printed as the HTTP check prints them', async () => {
    const target = tcp.handle.urls.grpc!;
    const allowed = await check(target, 'alice');
    expect(allowed.code).toBe(0);
    expect(JSON.parse(allowed.stdout)).toEqual({ decision: 'ALLOW', configKey: KEY, validUntil: expect.any(Number) });
    expect(allowed.stderr).toMatch(/^gRPC status 0 OK, source upstream, decision id \S+\n$/);
    expect(await check(target, 'bob')).toMatchObject({ code: 1, stdout: `${JSON.stringify({ decision: 'DENY', configKey: KEY })}\n`, stderr: expect.stringMatching(/^gRPC status 7 PERMISSION_DENIED, HTTP 403, source upstream/) });
    expect(await check(target, 'nobody')).toMatchObject({ code: 1, stdout: `${JSON.stringify({ decision: 'DENY', reason: 'customer_not_found' })}\n` });
    expect(await check(target, 's500')).toMatchObject({ code: 2, stdout: `${JSON.stringify({ decision: 'DENY', error: 'upstream_5xx' })}\n`, stderr: expect.stringMatching(/^gRPC status 14 UNAVAILABLE, HTTP 503, source fail-closed/) });
    // Asked as Envoy asks: the decisions were counted on the gRPC route.
    expect(await tcp.metric('consent_sidecar_decisions_total', { route: 'ext_authz_grpc' })).toBe(4);
  });

  it('over a Unix socket, with the sidecar\'s own user header', async () => {
    const r = await check(`unix:${join(dir, 'grpc.sock')}`, 'alice', ['--forward-auth-user-header', 'x-customer']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ decision: 'ALLOW' });
    // Without it the user reference is in a header this sidecar does not read: a 400 denial, no decision.
    expect((await check(`unix:${join(dir, 'grpc.sock')}`, 'alice')).code).toBe(2);
  });

  it('sends what Envoy sends: the user header among the HTTP headers, the configKey as context_extensions["configKey"]', async () => {
    fakeAnswer = { status: { code: 7 }, denied_response: { status: { code: 403 }, headers: [{ header: { key: 'x-consent-deny-reason', value: 'evaluated' } }] } };
    seen.length = 0;
    expect((await check(fakeTarget, 'alice')).code).toBe(1);
    expect(seen).toHaveLength(1);
    const attributes = (seen[0] as { attributes: { request: { http: { headers: Record<string, string> } }; context_extensions: Record<string, string> } }).attributes;
    expect(attributes.request.http.headers).toEqual({ 'x-user-reference': 'alice' });
    expect(attributes.context_extensions).toEqual({ configKey: KEY });
  });

  it('fails closed on an answer that is not a well-formed ALLOW: OK without a valid-until, or an expired one, is no decision', async () => {
    for (const answer of [
      { status: { code: 0 }, ok_response: {} },
      { status: { code: 0 }, ok_response: { headers: [{ header: { key: 'x-consent-valid-until', value: String(Date.now() - 1000) } }] } },
      { status: { code: 0 }, ok_response: { headers: [{ header: { key: 'x-consent-valid-until', value: 'soon' } }] } },
      { status: { code: 0 }, ok_response: { headers: [{ header: { key: 'x-consent-valid-until', value: String(Date.now() + 60_000) } }, { header: { key: 'x-consent-valid-until', value: String(Date.now() + 90_000) } }] } },
      { status: { code: 0 }, denied_response: { status: { code: 403 } } },
      { status: { code: 5 } },
    ]) {
      fakeAnswer = answer;
      const r = await check(fakeTarget, 'alice');
      expect([r.code, (JSON.parse(r.stdout) as { decision: string }).decision], JSON.stringify(answer)).toEqual([2, 'DENY']);
    }
    fakeAnswer = { status: { code: 0 }, ok_response: { headers: [{ header: { key: 'x-consent-valid-until', value: String(Date.now() + 60_000) } }] } };
    expect((await check(fakeTarget, 'alice')).code).toBe(0);
  });

  it('nothing listening: says so, prints no answer, exits 2', async () => {
    const r = await check(`127.0.0.1:${await freePort()}`, 'alice', ['--upstream-timeout-ms', '5000']);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/could not get an answer from the gRPC listener at 127\.0\.0\.1:\d+ \(UNAVAILABLE: .*\); is it running with --grpc-listen\? No decision\./);
  });

  it.each([
    [['--grpc', 'nowhere'], '--grpc: expected host:port'],
    [['--grpc', '127.0.0.1:7703', '--via', 'http://127.0.0.1:7700'], '--via and --grpc'],
    [['--grpc', '127.0.0.1:7703', '--upstream-url', 'http://x', '--api-key', 'k'], '--grpc asks a running sidecar, which uses its own upstream settings: drop --upstream-url, --api-key'],
    [['--forward-auth-user-header', 'x-customer', '--upstream-url', 'http://127.0.0.1:1', '--api-key', 'k'], '--forward-auth-user-header is for --grpc'],
  ])('usage errors name the flag: %j', async (args, message) => {
    const r = await runCli(['check', '--user-reference', 'alice', '--config-key', KEY, ...args]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(message);
  });
});
