import type { ClientHttp2Session } from 'node:http2';
import { deflateSync } from 'node:zlib';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { checkRequest, headersOf } from '../helpers/grpc.js';
import { checkRequestBytes, checkResponseOf, grpcFrame, gzip, h2Connect, rawCall, type RawAnswer } from '../helpers/h2-raw.js';
import { startTestSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { allow, startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { eventually, PATIENTLY } from '../helpers/wait.js';

// Every Check that reaches the listener ends as a decision: framing a unary call cannot have (no
// message, a message cut short, two messages, compression that cannot be undone, a request that
// does not arrive whole in time) is a successful gRPC call (status 0) whose CheckResponse is
// INVALID_ARGUMENT with a denied 400, never a gRPC error status that Envoy's failure_mode_allow
// would turn into an ALLOW. Sent by a raw HTTP/2 client (node:http2), byte for byte.

const KEY = 'marketing-email';
const REQ = checkRequestBytes(checkRequest({ 'x-user-reference': 'alice' }, { configKey: KEY }));

let upstream: ScriptedUpstream | undefined;
let sidecar: TestSidecar | undefined;
let session: ClientHttp2Session | undefined;

afterEach(async () => {
  session?.destroy();
  await sidecar?.close();
  await upstream?.close();
  [session, sidecar, upstream] = [undefined, undefined, undefined];
});

async function start(flags: Record<string, string> = {}): Promise<{ u: ScriptedUpstream; s: TestSidecar; h: ClientHttp2Session }> {
  upstream = await startUpstream((r) => ({ body: allow((JSON.parse(r.body) as { configKey: string }).configKey, Date.now() + 60_000) }));
  sidecar = await startTestSidecar(upstream.url, { 'grpc-listen': '127.0.0.1:0', ...flags });
  session = await h2Connect(sidecar.handle.urls.grpc!);
  return { u: upstream, s: sidecar, h: session };
}

/** A successful call (HTTP 200, grpc-status 0) answering a denied 400 INVALID_ARGUMENT; its message. */
function expectRefused(a: RawAnswer): string {
  expect([a.httpStatus, a.grpcStatus], a.grpcMessage).toEqual([200, 0]);
  const res = checkResponseOf(a);
  expect(res.status?.code).toBe(3);
  expect(res.http_response).toBe('denied_response');
  expect(res.denied_response!.status!.code).toBe('BadRequest');
  expect(headersOf(res)).toMatchObject({ 'x-consent-decision-error': 'invalid_request', 'x-consent-decision-source': 'rejected' });
  return res.status!.message!;
}

describe('malformed gRPC framing is a denied CheckResponse, never a gRPC error', () => {
  const cases: [string, { chunks: Buffer[]; headers?: Record<string, string> }, RegExp][] = [
    ['no message', { chunks: [] }, /without a message/],
    ['a message cut short', { chunks: [grpcFrame(REQ.subarray(0, 10), 0, REQ.length)] }, /inside a message/],
    ['a prefix cut short', { chunks: [Buffer.from([0, 0, 0])] }, /inside a message/],
    ['two messages in one call', { chunks: [grpcFrame(REQ), grpcFrame(REQ)] }, /more than one message/],
    ['a compressed message under an unknown grpc-encoding', { chunks: [grpcFrame(REQ, 1)], headers: { 'grpc-encoding': 'snappy' } }, /grpc-encoding "snappy"/],
    ['a gzip message that is not gzip', { chunks: [grpcFrame(REQ, 1)], headers: { 'grpc-encoding': 'gzip' } }, /does not decompress/],
    ['a compressed message without grpc-encoding', { chunks: [grpcFrame(REQ, 1)] }, /without a grpc-encoding/],
    ['a message flag that does not exist', { chunks: [grpcFrame(REQ, 2)] }, /flag 2/],
  ];

  it.each(cases)('%s', async (_name, call, detail) => {
    const { u, s, h } = await start();
    expect(expectRefused(await rawCall(h, call).answer)).toMatch(detail);
    expect(u.checks).toBe(0);
    expect(await s.metric('consent_sidecar_decisions_total', { decision: 'deny', source: 'rejected', route: 'ext_authz_grpc' })).toBe(1);
  });

  it('gzip and deflate messages are read; a grpc-timeout grpc-js would refuse is not the listener\'s business', async () => {
    const { u, h } = await start();
    for (const [encoding, bytes] of [['gzip', gzip(REQ)], ['deflate', deflateSync(REQ)]] as const) {
      const res = checkResponseOf(await rawCall(h, { chunks: [grpcFrame(bytes, 1)], headers: { 'grpc-encoding': encoding } }).answer);
      expect(res.status?.code ?? 0).toBe(0);
    }
    const odd = await rawCall(h, { chunks: [grpcFrame(REQ)], headers: { 'grpc-timeout': 'soon' } }).answer;
    expect(odd.grpcStatus).toBe(0);
    expect(checkResponseOf(odd).status?.code ?? 0).toBe(0);
    expect(u.checks).toBe(1);
  });

  it('a gzip message that decompresses past --grpc-max-message-bytes: 400, never inflated whole', async () => {
    const { h } = await start({ 'grpc-max-message-bytes': '2048' });
    const bomb = gzip(Buffer.alloc(1024 * 1024));
    expect(expectRefused(await rawCall(h, { chunks: [grpcFrame(bomb, 1)], headers: { 'grpc-encoding': 'gzip' } }).answer)).toMatch(/decompresses to more than 2048 bytes/);
  });

  it('a declared length over --grpc-max-message-bytes is answered at its prefix, while the client still sends', async () => {
    const { h } = await start();
    // 8 MiB declared, a little sent, the request side left open: the answer does not wait for the rest.
    const { stream, answer } = rawCall(h, { chunks: [grpcFrame(Buffer.alloc(1024), 0, 8 * 1024 * 1024)], end: false });
    expect(expectRefused(await answer)).toMatch(/larger than 65536 bytes/);
    expect(stream.closed).toBe(true);
  });

  it('a request that does not arrive whole within --grpc-request-timeout-ms: 400', async () => {
    const { u, h } = await start({ 'grpc-request-timeout-ms': '200' });
    const { answer } = rawCall(h, { chunks: [grpcFrame(REQ.subarray(0, 5), 0, REQ.length)], end: false });
    expect(expectRefused(await answer)).toMatch(/did not arrive whole within 200 ms/);
    // And a message complete but never half-closed, the same.
    const { answer: open } = rawCall(h, { chunks: [grpcFrame(REQ)], end: false });
    expect(expectRefused(await open)).toMatch(/did not arrive whole/);
    expect(u.checks).toBe(0);
  });

  it('bytes of requests not arrived whole are bounded across streams: the largest holder is cut (503 overload), a small request goes through', async () => {
    const { u, s, h } = await start({ 'grpc-max-message-bytes': String(8 * 1024 * 1024), 'grpc-max-unfinished-bytes': String(9 * 1024 * 1024) });
    // One stream holds 6 MiB of a declared 8 MiB; a second pushes past the budget.
    const big = rawCall(h, { chunks: [grpcFrame(Buffer.alloc(6 * 1024 * 1024), 0, 8 * 1024 * 1024)], end: false });
    await vi.waitFor(async () => expect(await s.metric('consent_sidecar_grpc_unfinished_bytes')).toBeGreaterThanOrEqual(6 * 1024 * 1024), PATIENTLY);
    const second = rawCall(h, { chunks: [grpcFrame(Buffer.alloc(4 * 1024 * 1024), 0, 8 * 1024 * 1024)], end: false });
    const first = checkResponseOf(await eventually(big.answer, 'the largest holder answered'));
    expect(first.status?.code).toBe(14);
    expect(headersOf(first)['x-consent-decision-error']).toBe('overload');
    second.stream.close();
    await eventually(second.answer, 'the second stream closed');
    // The budget is given back; a whole small request is decided.
    await vi.waitFor(async () => expect(await s.metric('consent_sidecar_grpc_unfinished_bytes')).toBe(0), PATIENTLY);
    expect(checkResponseOf(await rawCall(h, { chunks: [grpcFrame(REQ)] }).answer).status?.code ?? 0).toBe(0);
    expect(u.checks).toBe(1);
    expect(await s.metric('consent_sidecar_fail_closed_total', { cause: 'overload' })).toBeGreaterThanOrEqual(1);
  });
});

describe('what is not a Check of ours: the protocol\'s answers (docs/ext-authz-grpc.md)', () => {
  it('a method not served: UNIMPLEMENTED; not gRPC at all: HTTP 415', async () => {
    const { h } = await start();
    const unknown = await rawCall(h, { path: '/envoy.service.auth.v2.Authorization/Check', chunks: [grpcFrame(REQ)] }).answer;
    expect([unknown.httpStatus, unknown.grpcStatus]).toEqual([200, 12]);
    const plain = await rawCall(h, { headers: { 'content-type': 'application/json' }, chunks: [REQ] }).answer;
    expect(plain.httpStatus).toBe(415);
    // Answered, and a client that keeps its side open is cut soon after: no stream held for nothing.
    const held = await rawCall(h, { path: '/x.Y/Z', chunks: [grpcFrame(REQ)], end: false }).answer;
    expect([held.grpcStatus, held.rstCode]).toEqual([12, 0]);
  });
});
