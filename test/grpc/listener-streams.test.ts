import { connect as h2connect, type ClientHttp2Session, type ClientHttp2Stream } from 'node:http2';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { checkRequest, GrpcClient, headersOf, type CheckResponse } from '../helpers/grpc.js';
import { checkRequestBytes, checkResponseOf, grpcFrame, h2Connect, rawCall, type RawAnswer } from '../helpers/h2-raw.js';
import { startTestSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { allow, startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { eventually, PATIENTLY } from '../helpers/wait.js';

// The gRPC listener's streams are bounded across connections (--grpc-max-streams): a flood of
// calls that send their headers and nothing more holds at most the cap, and a Check past it is
// answered at once (a successful call, denied 503 overload), never reset. A stream whose client
// never reads its answer, a health Watch, or a connection let go whose peer keeps its half open
// keep no connection (nor its place under the cap) for ever.

const KEY = 'marketing-email';
const CHECK = '/envoy.service.auth.v3.Authorization/Check';
const WATCH = '/grpc.health.v1.Health/Watch';
const HEALTH_CHECK = '/grpc.health.v1.Health/Check';
/** An empty HealthCheckRequest, framed. */
const EMPTY = Buffer.from([0, 0, 0, 0, 0]);

let upstream: ScriptedUpstream | undefined;
let sidecar: TestSidecar | undefined;
let client: GrpcClient | undefined;
const sessions: ClientHttp2Session[] = [];
const sockets: Socket[] = [];

afterEach(async () => {
  for (const s of sessions.splice(0)) s.destroy();
  for (const s of sockets.splice(0)) s.destroy();
  client?.close();
  await sidecar?.close();
  await upstream?.close();
  [client, sidecar, upstream] = [undefined, undefined, undefined];
});

async function start(flags: Record<string, string> = {}): Promise<{ s: TestSidecar; target: string; port: number }> {
  upstream = await startUpstream((r) => ({ body: allow((JSON.parse(r.body) as { configKey: string }).configKey, Date.now() + 60_000) }));
  sidecar = await startTestSidecar(upstream.url, { 'grpc-listen': '127.0.0.1:0', ...flags });
  const target = sidecar.handle.urls.grpc!;
  return { s: sidecar, target, port: Number(target.slice(target.lastIndexOf(':') + 1)) };
}

async function connectTo(target: string, localAddress?: string): Promise<ClientHttp2Session> {
  const h = await h2Connect(target, localAddress);
  h.on('error', () => undefined);
  sessions.push(h);
  return h;
}

/** A decision for a new caller (a grpc-js channel of its own, from 127.0.0.1): a successful call. */
async function newCallerDecision(target: string, user: string): Promise<CheckResponse> {
  client?.close();
  client = new GrpcClient(target);
  const r = await client.check(checkRequest({ 'x-user-reference': user }, { configKey: KEY }));
  expect(r.err, `${r.err?.code} ${r.err?.details}`).toBeUndefined();
  return r.res!;
}

/** One call's answer as it arrives (headers, then trailers), without waiting for the stream to close. */
function statusOf(stream: ClientHttp2Stream): Promise<string> {
  return new Promise((resolve) => {
    stream.on('error', (e: NodeJS.ErrnoException) => resolve(`error ${e.code}`));
    stream.on('response', (h) => {
      if (h['grpc-status'] !== undefined) resolve(`grpc-status ${String(h['grpc-status'])}`);
    });
    stream.on('trailers', (t) => resolve(`grpc-status ${String(t['grpc-status'])}`));
    stream.on('close', () => resolve(`closed, rst ${stream.rstCode}`));
    stream.resume();
  });
}

describe('gRPC listener streams', () => {
  it('a flood of HEADERS-only Check streams on many connections: open streams held at --grpc-max-streams, the rest answered at once (OK status, denied 503 overload), a new Check still answered', async () => {
    const MAX = 150;
    const { s, target } = await start({ 'grpc-max-streams': String(MAX), 'grpc-request-timeout-ms': '60000' });
    const answers: Promise<RawAnswer>[] = [];
    const CONNS = 5;
    for (let k = 0; k < CONNS; k++) {
      const h = await connectTo(target);
      await new Promise<void>((resolve) => (h.remoteSettings.maxConcurrentStreams !== undefined && h.remoteSettings.maxConcurrentStreams < 2 ** 32 - 1 ? resolve() : h.once('remoteSettings', () => resolve())));
      // The per-connection default: what Envoy needs, not 1,000.
      expect(h.remoteSettings.maxConcurrentStreams).toBe(100);
      for (let i = 0; i < 100; i++) answers.push(rawCall(h, { end: false }).answer);
    }
    // 500 streams asked for, 150 held: the 350 past the cap answered at once, each a CheckResponse.
    const shed: RawAnswer[] = [];
    for (const a of answers) void a.then((r) => shed.push(r));
    await vi.waitFor(() => expect(shed.length).toBeGreaterThanOrEqual(CONNS * 100 - MAX), PATIENTLY);
    expect(await s.metric('consent_sidecar_grpc_streams')).toBeLessThanOrEqual(MAX);
    for (const r of shed.slice(0, 20)) {
      expect([r.httpStatus, r.grpcStatus]).toEqual([200, 0]);
      const res = checkResponseOf(r);
      expect(res.status?.code).toBe(14);
      expect(res.denied_response!.status!.code).toBe('ServiceUnavailable');
      expect(headersOf(res)['x-consent-decision-error']).toBe('overload');
    }
    expect(await s.metric('consent_sidecar_fail_closed_total', { cause: 'overload' })).toBeGreaterThanOrEqual(CONNS * 100 - MAX);
    // The held ones still hold the cap: a new Check is answered all the same, a successful call.
    const res = await newCallerDecision(target, 'alice');
    expect(res.status?.code).toBe(14);
    expect(headersOf(res)['x-consent-decision-error']).toBe('overload');
    expect(await s.metric('consent_sidecar_grpc_streams')).toBeLessThanOrEqual(MAX);
    // Once the held ones go, calls are decided again.
    for (const h of sessions.splice(0)) h.destroy();
    await vi.waitFor(async () => expect(await s.metric('consent_sidecar_grpc_streams')).toBe(0), PATIENTLY);
    expect((await newCallerDecision(target, 'alice')).status?.code ?? 0).toBe(0);
  });

  it('health Watches: at most 16 of one address, then UNAVAILABLE; another address still gets its own', async () => {
    const { s, target } = await start();
    const one = await connectTo(target);
    const watches = Array.from({ length: 17 }, () => rawCall(one, { path: WATCH, chunks: [EMPTY], end: true }).stream);
    const statuses = watches.map(statusOf);
    // The 17th: refused with UNAVAILABLE; the 16 before it stay open.
    expect(await eventually(statuses[16]!, 'the 17th Watch answered')).toBe('grpc-status 14');
    expect(await s.metric('consent_sidecar_grpc_streams')).toBe(16);
    const other = await connectTo(target, '127.0.0.2');
    const theirs = rawCall(other, { path: WATCH, chunks: [EMPTY], end: true }).stream;
    await new Promise<void>((resolve) => theirs.once('data', () => resolve()));
    expect(await s.metric('consent_sidecar_grpc_streams')).toBe(17);
  });

  it('a connection with only a Watch open is idle: let go at the cap for a newcomer of the same address, its Watch ended OK', async () => {
    const { s, target } = await start({ 'grpc-max-connections': '4' });
    // Four connections, each with one Watch open and nothing else: the listener full, all from 127.0.0.1.
    const held: Promise<string>[] = [];
    for (let i = 0; i < 4; i++) {
      const h = await connectTo(target);
      const w = rawCall(h, { path: WATCH, chunks: [EMPTY], end: true }).stream;
      held.push(statusOf(w));
      await new Promise<void>((resolve) => w.once('response', () => resolve()));
    }
    await vi.waitFor(async () => expect(await s.metric('consent_sidecar_connections', { listener: 'grpc' })).toBe(4), PATIENTLY);
    // A newcomer of the same address (Envoy beside a process in the pod): one Watch's connection makes room.
    expect((await newCallerDecision(target, 'bob')).status?.code ?? 0).toBe(0);
    expect(await Promise.race(held)).toBe('grpc-status 0');
    expect(await s.metric('consent_sidecar_connections_evicted_total', { listener: 'grpc', state: 'idle' })).toBeGreaterThanOrEqual(1);
  });

  it('a Check whose client never reads its answer (a zero window): the stream reset and its connection let go after the write deadline, counted; a newcomer then answered at the cap', async () => {
    const { s, target } = await start({ 'grpc-max-connections': '2' });
    const [host, port] = [target.slice(0, target.lastIndexOf(':')), Number(target.slice(target.lastIndexOf(':') + 1))];
    const req = grpcFrame(checkRequestBytes(checkRequest({ 'x-user-reference': 'carol' }, { configKey: KEY })));
    const closed: Promise<void>[] = [];
    for (let i = 0; i < 2; i++) {
      const h = h2connect(`http://${host}:${port}`, { settings: { initialWindowSize: 0 } });
      h.on('error', () => undefined);
      sessions.push(h);
      closed.push(new Promise((resolve) => h.once('close', () => resolve())));
      const st = h.request({ ':method': 'POST', ':path': CHECK, 'content-type': 'application/grpc', te: 'trailers' });
      st.on('error', () => undefined);
      st.pause();
      st.end(req);
      // Answered (headers come: they are not flow-controlled), never read.
      await new Promise<void>((resolve) => st.once('response', () => resolve()));
    }
    // Both connections busy with an answer nobody reads: nothing to make room for a newcomer of their address.
    expect(await s.metric('consent_sidecar_connections', { listener: 'grpc' })).toBe(2);
    // Past the write deadline: both streams reset, both connections let go (GOAWAY) and closed.
    await vi.waitFor(async () => expect(await s.metric('consent_sidecar_grpc_connections_closed_total', { reason: 'write_timeout' })).toBe(2), PATIENTLY);
    await Promise.all(closed);
    expect((await newCallerDecision(target, 'dave')).status?.code ?? 0).toBe(0);
  });

  it('a peer that fills the cap with prefaced connections it never closes (half-open after the GOAWAY): newcomers from another address are answered, one after another', async () => {
    const CAP = 8;
    const { s, port } = await start({ 'grpc-max-connections': String(CAP) });
    const preface = Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0])]);
    const ended: number[] = [];
    for (let i = 0; i < CAP; i++) {
      const sock = connect({ host: '127.0.0.1', port, allowHalfOpen: true });
      sock.on('error', () => undefined);
      // The server's end (after its GOAWAY) is noted; this side stays open.
      sock.on('end', () => ended.push(i));
      sock.resume();
      sock.write(preface);
      sockets.push(sock);
    }
    await vi.waitFor(async () => expect(await s.metric('consent_sidecar_connections', { listener: 'grpc' })).toBe(CAP), PATIENTLY);
    // Each newcomer keeps its connection; each needs a place the holder gives up (a GOAWAY, its half left open).
    for (let n = 1; n <= 3; n++) {
      // The one let go for the newcomer before has had its GOAWAY and the server's end (FIN).
      await vi.waitFor(() => expect(ended.length).toBeGreaterThanOrEqual(n - 1), PATIENTLY);
      const h = await connectTo(`127.0.0.1:${port}`, '127.0.0.2');
      const status = statusOf(rawCall(h, { path: HEALTH_CHECK, chunks: [EMPTY] }).stream);
      expect(await status, `newcomer ${n}`).toBe('grpc-status 0');
    }
    expect(await s.metric('consent_sidecar_connections', { listener: 'grpc' })).toBeLessThanOrEqual(CAP);
  });
});
