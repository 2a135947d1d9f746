import { Registry } from 'prom-client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DecisionMetrics, type DecisionService } from '../../src/decision/index.js';
import { createCheckHandler, extAuthzBoundary, type CheckReply } from '../../src/grpc/ext-authz.js';
import { DecisionBoundary } from '../../src/edge/decision-boundary.js';
import { DeadlineQueue } from '../../src/lib/deadline-queue.js';
import { WatchedDeadlines } from '../helpers/watched-deadlines.js';
import { silentLogger } from '../../src/observability/index.js';
import { checkRequest, CheckRequestType, CheckResponseType, GrpcClient, headersOf, type CheckResponse } from '../helpers/grpc.js';
import { startTestSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { PATIENTLY } from '../helpers/wait.js';
import { allow, startUpstream, type ReceivedRequest, type Reply, type ScriptedUpstream } from '../helpers/upstream.js';

// Every way of having no decision reaches Envoy as a successful gRPC call (transport status OK)
// whose CheckResponse is UNAVAILABLE with a denied 503 and x-consent-decision-error: never a gRPC
// error, which Envoy's failure_mode_allow would turn into an ALLOW.

const KEY = 'flow-payments';
const REQ = checkRequest({ 'x-user-reference': 'user-fault-1' }, { configKey: KEY });

let upstream: ScriptedUpstream | undefined;
let sidecar: TestSidecar | undefined;
let client: GrpcClient | undefined;

afterEach(async () => {
  client?.close();
  await sidecar?.close();
  await upstream?.close();
  [client, sidecar, upstream] = [undefined, undefined, undefined];
});

async function setup(reply: Reply | ((r: ReceivedRequest) => Reply), flags: Record<string, string> = {}): Promise<{ u: ScriptedUpstream; s: TestSidecar; c: GrpcClient }> {
  upstream = await startUpstream(reply);
  sidecar = await startTestSidecar(upstream.url, { 'grpc-listen': '127.0.0.1:0', ...flags });
  client = new GrpcClient(sidecar.handle.urls.grpc!);
  return { u: upstream, s: sidecar, c: client };
}

/** A denied 503 with this cause, delivered as a successful gRPC call, counted by cause and route. */
async function expectNoDecision(s: TestSidecar, c: GrpcClient, cause: string, req: unknown = REQ): Promise<void> {
  const { res, err } = await c.check(req);
  expect(err).toBeUndefined();
  expect(res!.status?.code).toBe(14);
  expect(res!.http_response).toBe('denied_response');
  expect(res!.denied_response!.status!.code).toBe('ServiceUnavailable');
  expect(headersOf(res!)).toMatchObject({ 'x-consent-decision-error': cause, 'x-consent-decision-source': 'fail-closed' });
  expect(headersOf(res!)['x-consent-decision-id']).toBeTruthy();
  expect(res!.ok_response).toBeUndefined();
  expect(await s.metric('consent_sidecar_fail_closed_total', { cause })).toBeGreaterThanOrEqual(1);
  expect(await s.metric('consent_sidecar_decisions_total', { decision: 'deny', source: 'fail_closed', route: 'ext_authz_grpc' })).toBeGreaterThanOrEqual(1);
  expect(await s.metric('consent_sidecar_cache_entries')).toBe(0);
}

describe('gRPC ext_authz: no decision is a denied 503 with gRPC status OK', () => {
  const cases: [string, Reply, Record<string, string>][] = [
    ['upstream_timeout', { fault: 'hang' }, { 'upstream-timeout-ms': '300' }],
    ['upstream_5xx', { status: 500, body: allow(KEY, Date.now() + 60_000) }, {}],
    ['upstream_4xx', { status: 404, body: allow(KEY, Date.now() + 60_000) }, {}],
    ['upstream_unreachable', { fault: 'reset' }, {}],
    ['malformed_response', { body: '{"decision":"ALLOW",' }, {}],
    ['contradictory_response', { body: `{"decision":"DENY","configKey":"${KEY}","decision":"ALLOW","validUntil":${Date.now() + 60_000}}` }, {}],
    ['expired_on_arrival', { body: allow(KEY, Date.now() - 1000) }, {}],
  ];

  it.each(cases)('%s', async (cause, reply, flags) => {
    const { s, c } = await setup(reply, flags);
    await expectNoDecision(s, c, cause);
  });

  it('an ALLOW for another configKey (contradictory_response)', async () => {
    const { s, c } = await setup({ body: allow('some-other-flow', Date.now() + 60_000) });
    await expectNoDecision(s, c, 'contradictory_response');
  });

  it('circuit_open: after the breaker opened, without asking the service', async () => {
    const { u, s, c } = await setup({ status: 503 }, { 'breaker-failure-threshold': '1', 'breaker-cooldown-ms': '600000' });
    await expectNoDecision(s, c, 'upstream_5xx');
    await expectNoDecision(s, c, 'circuit_open');
    expect(u.checks).toBe(1);
  });

  it('overload: misses beyond --upstream-max-in-flight, without reaching the service', async () => {
    let release = (): void => undefined;
    const held = new Promise<void>((r) => (release = r));
    const { u, s, c } = await setup((r) => ({ hold: held, body: allow((JSON.parse(r.body) as { configKey: string }).configKey, Date.now() + 60_000) }), { 'upstream-max-in-flight': '1' });
    const first = c.check(checkRequest({ 'x-user-reference': 'user-1' }, { configKey: KEY }));
    await u.waitForCount(1);
    await expectNoDecision(s, c, 'overload', checkRequest({ 'x-user-reference': 'user-2' }, { configKey: KEY }));
    release();
    expect((await first).res!.status?.code ?? 0).toBe(0);
    expect(u.checks).toBe(1);
  });

  it('a flood of concurrent misses meets overload: every call answered, none an error, only the admitted ones ALLOW', async () => {
    let release = (): void => undefined;
    const held = new Promise<void>((r) => (release = r));
    const { u, s, c } = await setup((r) => ({ hold: held, body: allow((JSON.parse(r.body) as { configKey: string }).configKey, Date.now() + 60_000) }), { 'upstream-max-in-flight': '4' });
    const calls = Array.from({ length: 40 }, (_, i) => c.check(checkRequest({ 'x-user-reference': `flood-${i}` }, { configKey: KEY })));
    // The shed ones are answered while the admitted ones still wait on the service.
    await vi.waitFor(async () => expect(await s.metric('consent_sidecar_fail_closed_total', { cause: 'overload' })).toBe(36), PATIENTLY);
    release();
    const all = await Promise.all(calls);
    expect(all.filter((r) => r.err !== undefined)).toEqual([]);
    const codes = all.map((r) => r.res!.status?.code ?? 0);
    expect(codes.filter((x) => x === 0)).toHaveLength(4);
    expect(codes.filter((x) => x === 14)).toHaveLength(36);
    expect(all.filter((r) => (r.res!.status?.code ?? 0) === 14).every((r) => headersOf(r.res!)['x-consent-decision-error'] === 'overload')).toBe(true);
    expect(u.checks).toBe(4);
  });
});

describe('the sidecar\'s own trouble', () => {
  const decode = (b: Buffer): CheckResponse => CheckResponseType().toObject(CheckResponseType().decode(b), { enums: String, oneofs: true }) as CheckResponse;
  const request = (): Buffer => Buffer.from(CheckRequestType().encode(REQ).finish());
  /** A call's reply that records what is sent: a CheckResponse is all a reply can carry (no error path). */
  const recorder = (): CheckReply & { replies: Buffer[] } => {
    const r = {
      replies: [] as Buffer[],
      sent: false,
      send(message: Buffer) {
        r.sent = true;
        r.replies.push(message);
      },
    };
    return r;
  };

  function handlerWith(service: Partial<DecisionService>, metrics = new DecisionMetrics(new Registry(), () => 0)) {
    const boundary = new DecisionBoundary({ metrics, logger: silentLogger(), decisionLog: null });
    return { metrics, handle: createCheckHandler({ service: service as DecisionService, answers: extAuthzBoundary(boundary), userHeader: 'x-user-reference', maxMessageBytes: 65536, timeoutMs: 1000, deadlines: new DeadlineQueue() }) };
  }

  it('an exception while deciding is UNAVAILABLE with a denied 503 internal_error, answered once', async () => {
    const { handle } = handlerWith({
      cached: () => {
        throw new Error('boom');
      },
    });
    const reply = recorder();
    handle.request(request(), reply);
    expect(reply.replies).toHaveLength(1);
    const res = decode(reply.replies[0]!);
    expect(res.status?.code).toBe(14);
    expect(headersOf(res)['x-consent-decision-error']).toBe('internal_error');
  });

  it('decide() throwing at once (not a rejection): answered once, counted once, its call deadline taken back', async () => {
    // The deadlines the handler sets, watched: one left behind would answer (and count) the call again when it passed.
    const deadlines = new WatchedDeadlines();
    const registry = new Registry();
    const boundary = new DecisionBoundary({ metrics: new DecisionMetrics(registry, () => 0), logger: silentLogger(), decisionLog: null });
    const service = {
      cached: () => undefined,
      decide: () => {
        throw new Error('thrown before any promise');
      },
    };
    const handle = createCheckHandler({ service: service as unknown as DecisionService, answers: extAuthzBoundary(boundary), userHeader: 'x-user-reference', maxMessageBytes: 65536, timeoutMs: 1000, deadlines });
    const reply = recorder();
    handle.request(request(), reply);
    expect(reply.replies).toHaveLength(1);
    expect(headersOf(decode(reply.replies[0]!))['x-consent-decision-error']).toBe('internal_error');
    expect(deadlines.live.size).toBe(0);
    const counted = (await registry.getSingleMetric('consent_sidecar_decisions_total')!.get()).values.reduce((n, v) => n + v.value, 0);
    expect(counted).toBe(1);
  });

  it('an answer whose rendering fails is UNAVAILABLE with a denied 503 internal_error, answered once and never an error', async () => {
    // An answer whose body is not the JSON the renderer reads: rendering it throws, and the boundary
    // writes the error's fail-closed answer instead.
    const unreadable = { status: 200, decision: 'deny', source: 'upstream', body: '{not json', bodyBytes: 9 } as const;
    const registry = new Registry();
    const { handle } = handlerWith({ cached: () => undefined, decide: () => Promise.resolve(unreadable as never) }, new DecisionMetrics(registry, () => 0));
    const reply = recorder();
    handle.request(request(), reply);
    await vi.waitFor(() => expect(reply.replies).toHaveLength(1), PATIENTLY);
    const res = decode(reply.replies[0]!);
    expect(res.status?.code).toBe(14);
    expect(res.denied_response!.status!.code).toBe('ServiceUnavailable');
    expect(headersOf(res)['x-consent-decision-error']).toBe('internal_error');
    // Counted once, as what the service answered (the count came before the write).
    const counted = (await registry.getSingleMetric('consent_sidecar_decisions_total')!.get()).values.filter((v) => v.value > 0);
    expect(counted.map((v) => [v.labels, v.value])).toEqual([[{ decision: 'deny', source: 'upstream', route: 'ext_authz_grpc' }, 1]]);
  });

  it('a rejected decision with a foreign error is internal_error; one whose counting fails every time gets the fixed last-resort reply', async () => {
    const { handle, metrics } = handlerWith({ cached: () => undefined, decide: () => Promise.reject(new TypeError('not a DecisionError')) });
    const reply = recorder();
    handle.request(request(), reply);
    await new Promise((r) => setImmediate(r));
    expect(headersOf(decode(reply.replies[0]!))['x-consent-decision-error']).toBe('internal_error');

    // Counting throws every time: the route's last resort, still a successful UNAVAILABLE reply.
    metrics.answered = () => {
      throw new Error('metrics broken');
    };
    const more = recorder();
    handle.request(request(), more);
    await new Promise((r) => setImmediate(r));
    expect(more.replies).toHaveLength(1);
    const last = decode(more.replies[0]!);
    expect(last.status?.code).toBe(14);
    expect(last.denied_response!.status!.code).toBe('ServiceUnavailable');
  });

  it('a decision that never settles is answered at the call deadline (--upstream-timeout-ms): upstream_timeout', async () => {
    const { handle } = handlerWith({ cached: () => undefined, decide: () => new Promise(() => undefined) });
    const reply = recorder();
    handle.request(request(), reply);
    await vi.waitFor(() => expect(reply.replies).toHaveLength(1), PATIENTLY);
    expect(decode(reply.replies[0]!).status?.code).toBe(14);
    expect(headersOf(decode(reply.replies[0]!))['x-consent-decision-error']).toBe('upstream_timeout');
  });
});
