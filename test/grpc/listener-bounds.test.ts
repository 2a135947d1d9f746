import type { ClientHttp2Session } from 'node:http2';
import { connect } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { checkRequest, GrpcClient, type CheckResponse } from '../helpers/grpc.js';
import { checkRequestBytes, checkResponseOf, grpcFrame, h2Connect, rawCall } from '../helpers/h2-raw.js';
import { Hold, type HoldMode } from '../helpers/hold-connections.js';
import { startTestSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { allow, startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { eventually, PATIENTLY, until } from '../helpers/wait.js';

// The gRPC listener's connections are bounded like the HTTP listeners': a cap (256) fair to every
// peer, a time for the HTTP/2 preface, one for a connection with no call. A peer holding every
// connection without a preface (or idle after one) keeps no new caller out.

const KEY = 'marketing-email';
const CAP = 256;

let upstream: ScriptedUpstream | undefined;
let sidecar: TestSidecar | undefined;
let client: GrpcClient | undefined;
let hold: Hold | undefined;
const sessions: ClientHttp2Session[] = [];

afterEach(async () => {
  hold?.stop();
  for (const s of sessions.splice(0)) s.destroy();
  client?.close();
  await sidecar?.close();
  await upstream?.close();
  [hold, client, sidecar, upstream] = [undefined, undefined, undefined, undefined];
});

async function start(flags: Record<string, string> = {}): Promise<{ s: TestSidecar; target: string; port: number }> {
  upstream = await startUpstream((r) => ({ body: allow((JSON.parse(r.body) as { configKey: string }).configKey, Date.now() + 60_000) }));
  sidecar = await startTestSidecar(upstream.url, { 'grpc-listen': '127.0.0.1:0', ...flags });
  const target = sidecar.handle.urls.grpc!;
  return { s: sidecar, target, port: Number(target.slice(target.lastIndexOf(':') + 1)) };
}

/** A decision for a new caller (a grpc-js channel of its own, from 127.0.0.1): a successful call. */
async function newCallerDecision(target: string, user: string): Promise<CheckResponse> {
  client = new GrpcClient(target);
  const r = await client.check(checkRequest({ 'x-user-reference': user }, { configKey: KEY }));
  expect(r.err, `${r.err?.code} ${r.err?.details}`).toBeUndefined();
  return r.res!;
}

describe('gRPC listener connections', () => {
  it.each<[string, string]>([
    ['another address (127.0.0.2)', '127.0.0.2'],
    ['the caller\'s own address (127.0.0.1, as a process in the pod would)', '127.0.0.1'],
  ])('256 connections that never send the HTTP/2 preface, from %s: a new caller gets a decision', async (_name, from) => {
    const { s, port } = await start();
    hold = new Hold({ host: '127.0.0.1', port, localAddress: from, count: CAP, mode: 'silent' });
    await until(async () => (await s.metric('consent_sidecar_connections', { listener: 'grpc' })) >= CAP, 'the gRPC listener full');
    const res = await newCallerDecision(s.handle.urls.grpc!, 'alice');
    expect(res.status?.code ?? 0).toBe(0);
    // Room was made by letting a request-less (preface-less) connection go, counted.
    expect(await s.metric('consent_sidecar_connections_evicted_total', { listener: 'grpc', state: 'request_less' })).toBeGreaterThanOrEqual(1);
    // Back within the cap: the holder reconnects what was cut (50 ms later), and each newcomer is
    // judged one over the cap before a connection is let go, so one reading may catch CAP + 1.
    await until(async () => (await s.metric('consent_sidecar_connections', { listener: 'grpc' })) <= CAP, 'the gRPC listener back within its cap');
  });

  it('256 HTTP/2 connections idle after their preface, from 127.0.0.2: a new caller gets a decision, the one let go gets a GOAWAY', async () => {
    const { s, target } = await start();
    let goaways = 0;
    for (let i = 0; i < CAP; i++) {
      const h = await h2Connect(target, '127.0.0.2');
      h.on('goaway', () => goaways++);
      h.on('error', () => undefined);
      sessions.push(h);
    }
    await until(async () => (await s.metric('consent_sidecar_connections', { listener: 'grpc' })) >= CAP, 'the gRPC listener full');
    expect((await newCallerDecision(target, 'bob')).status?.code ?? 0).toBe(0);
    await vi.waitFor(() => expect(goaways).toBeGreaterThanOrEqual(1), PATIENTLY);
    // The holder keeps the rest: one let go for the new caller.
    expect(await s.metric('consent_sidecar_connections_largest_peer', { listener: 'grpc' })).toBe(CAP - 1);
  });

  it.each<HoldMode>(['silent'])('a connection without a preface is closed after --grpc-preface-timeout-ms (%s), counted', async (mode) => {
    const { s, port } = await start({ 'grpc-preface-timeout-ms': '100' });
    hold = new Hold({ host: '127.0.0.1', port, localAddress: '127.0.0.2', count: 1, mode, reconnectMs: 60_000 });
    await until(() => hold!.cuts >= 1, 'the preface-less connection closed');
    expect(await s.metric('consent_sidecar_grpc_connections_closed_total', { reason: 'preface_timeout' })).toBeGreaterThanOrEqual(1);
  });

  it('a connection with no call for --grpc-idle-timeout-ms gets a GOAWAY and closes, counted; a call in flight keeps it', async () => {
    const { s, target } = await start({ 'grpc-idle-timeout-ms': '100', 'grpc-request-timeout-ms': '60000' });
    const h = await h2Connect(target);
    sessions.push(h);
    let goaway = false;
    let closed = false;
    h.on('goaway', () => (goaway = true));
    h.on('close', () => (closed = true));
    h.on('error', () => undefined);
    // A call whose request is still arriving keeps the connection busy, past the idle timeout.
    const req = checkRequestBytes(checkRequest({ 'x-user-reference': 'carol' }, { configKey: KEY }));
    const { stream, answer } = rawCall(h, { chunks: [grpcFrame(req).subarray(0, 8)], end: false });
    // The idle connection of another client is closed meanwhile: proof the sweep ran past the timeout.
    const other = await h2Connect(target);
    sessions.push(other);
    await new Promise<void>((resolve) => other.once('close', () => resolve()));
    expect(goaway).toBe(false);
    expect(closed).toBe(false);
    stream.end(grpcFrame(req).subarray(8));
    expect(checkResponseOf(await answer).status?.code ?? 0).toBe(0);
    await vi.waitFor(() => expect([goaway, closed]).toEqual([true, true]), PATIENTLY);
    expect(await s.metric('consent_sidecar_grpc_connections_closed_total', { reason: 'idle_timeout' })).toBeGreaterThanOrEqual(2);
  });

  it('an address above its share with every connection busy: one is cut (not left to linger) for another address\'s new caller', async () => {
    const { s, target } = await start({ 'grpc-max-connections': '4', 'grpc-request-timeout-ms': '60000' });
    const req = checkRequestBytes(checkRequest({ 'x-user-reference': 'erin' }, { configKey: KEY }));
    const resets: Promise<unknown>[] = [];
    for (let i = 0; i < 4; i++) {
      const h = await h2Connect(target, '127.0.0.2');
      h.on('error', () => undefined);
      sessions.push(h);
      // A request that never arrives whole: the connection is busy.
      resets.push(rawCall(h, { chunks: [grpcFrame(req).subarray(0, 8)], end: false }).answer);
    }
    await until(async () => (await s.metric('consent_sidecar_connections', { listener: 'grpc' })) >= 4, 'four busy connections held');
    expect((await newCallerDecision(target, 'frank')).status?.code ?? 0).toBe(0);
    expect(await s.metric('consent_sidecar_connections_evicted_total', { listener: 'grpc', state: 'busy' })).toBe(1);
    // The one cut is closed at once: its call ends (reset), its descriptor is free.
    await eventually(Promise.race(resets), 'the busy connection cut');
    expect(await s.metric('consent_sidecar_connections', { listener: 'grpc' })).toBeLessThanOrEqual(4);
  });

  it('a connection past the cap with nothing to take the place of is refused at once, counted', async () => {
    const { s, port, target } = await start({ 'grpc-max-connections': '2' });
    // Two busy calls from one peer fill the listener: a third connection of that peer is refused.
    const a = await h2Connect(target);
    const b = await h2Connect(target);
    sessions.push(a, b);
    const req = checkRequestBytes(checkRequest({ 'x-user-reference': 'dave' }, { configKey: KEY }));
    rawCall(a, { chunks: [grpcFrame(req).subarray(0, 8)], end: false });
    rawCall(b, { chunks: [grpcFrame(req).subarray(0, 8)], end: false });
    await until(async () => (await s.metric('consent_sidecar_connections', { listener: 'grpc' })) >= 2, 'two connections held');
    await vi.waitFor(async () => {
      const refusedNow = await new Promise<boolean>((resolve) => {
        const c = connect(port, '127.0.0.1');
        c.on('error', () => resolve(true));
        c.on('close', () => resolve(true));
        c.on('data', () => undefined);
        c.on('connect', () => c.write('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'));
      });
      expect(refusedNow).toBe(true);
    }, PATIENTLY);
    expect(await s.metric('consent_sidecar_connections_refused_total', { listener: 'grpc' })).toBeGreaterThanOrEqual(1);
  });
});
