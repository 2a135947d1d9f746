import { Registry } from 'prom-client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DecisionMetrics, type Answer, type DecisionService } from '../../src/decision/index.js';
import { DecisionBoundary } from '../../src/edge/decision-boundary.js';
import { callerQueueTimeout, createCheckHandler, extAuthzBoundary, type CheckReply } from '../../src/grpc/ext-authz.js';
import { answerByFor, answerMarginMs, parseGrpcTimeout } from '../../src/grpc/grpc-timeout.js';
import { DeadlineQueue, DeadlineQueues } from '../../src/lib/deadline-queue.js';
import { WatchedDeadlines } from '../helpers/watched-deadlines.js';
import { silentLogger } from '../../src/observability/index.js';
import { checkRequest, CheckRequestType, CheckResponseType, GrpcClient, headersOf, metadataOf, type CheckResponse } from '../helpers/grpc.js';
import { checkRequestBytes, checkResponseOf, grpcFrame, h2Connect, rawCall, type RawAnswer } from '../helpers/h2-raw.js';
import { startTestSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { allow, CHECK_PATH, startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { PATIENTLY } from '../helpers/wait.js';

// The caller's `grpc-timeout` (Envoy sends its ext_authz `timeout` as one) brings a Check's deadline
// forward: a decision slower than it ends as the sidecar's own denial (gRPC status OK, a denied 503
// upstream_timeout), never as the caller's timeout, which failure_mode_allow would let through.

const KEY = 'flow-grpc-timeout';

describe('parseGrpcTimeout', () => {
  it('reads 1 to 8 digits and a unit, in ms', () => {
    expect(parseGrpcTimeout('300m')).toBe(300);
    expect(parseGrpcTimeout('2S')).toBe(2000);
    expect(parseGrpcTimeout('1M')).toBe(60_000);
    expect(parseGrpcTimeout('1H')).toBe(3_600_000);
    expect(parseGrpcTimeout('1500u')).toBeCloseTo(1.5);
    expect(parseGrpcTimeout('2000000n')).toBeCloseTo(2);
    expect(parseGrpcTimeout('0m')).toBe(0);
    expect(parseGrpcTimeout('99999999S')).toBe(99_999_999_000);
    expect(parseGrpcTimeout('00000200m')).toBe(200);
  });

  it.each(['', 'm', '300', '000000001m', '1.5m', '-1m', '+1m', '1 m', ' 1m', '1mm', '1x', '1h', '1s', '1M1m', '١m', '0x1m'])('%j is not well-formed', (v) => {
    expect(parseGrpcTimeout(v)).toBeUndefined();
    expect(answerByFor(v, 1000)).toBe(Infinity);
  });

  it('the margin: 50 ms, or a quarter of a shorter timeout', () => {
    expect(answerMarginMs(200)).toBe(50);
    expect(answerMarginMs(2000)).toBe(50);
    expect(answerMarginMs(100)).toBe(25);
    expect(answerMarginMs(20)).toBe(5);
    expect(answerByFor('200m', 1000)).toBe(1150);
    expect(answerByFor('20m', 1000)).toBe(1015);
  });
});

describe('callerQueueTimeout', () => {
  it('whole ms below 256, then 128 steps an octave; never longer than the time left', () => {
    expect([0.4, 1, 1.9, 150.7, 255.9].map(callerQueueTimeout)).toEqual([0, 1, 1, 150, 255]);
    expect([256, 1000, 1001, 1999].map(callerQueueTimeout)).toEqual([256, 1000, 1000, 1992]);
    const timeouts = new Set<number>();
    for (let ms = 1; ms < 600_000; ms += 0.5) {
      const t = callerQueueTimeout(ms);
      if (!(t <= ms && t > ms - Math.max(1, ms / 128))) expect({ ms, t }).toBeUndefined();
      timeouts.add(t);
    }
    expect(timeouts.size).toBeLessThan(1700);
  });
});

describe('the Check handler with an answerBy', () => {
  const request = (): Buffer => Buffer.from(CheckRequestType().encode(checkRequest({ 'x-user-reference': 'u-1' }, { configKey: KEY })).finish());
  const decode = (b: Buffer): CheckResponse => CheckResponseType().toObject(CheckResponseType().decode(b), { enums: String, oneofs: true }) as CheckResponse;
  const recorder = (answerBy: number): CheckReply & { replies: Buffer[] } => {
    const r = {
      replies: [] as Buffer[],
      sent: false,
      answerBy,
      send(message: Buffer) {
        r.sent = true;
        r.replies.push(message);
      },
    };
    return r;
  };
  function handlerWith(service: Partial<DecisionService>, callerDeadlines = new DeadlineQueues()) {
    const boundary = new DecisionBoundary({ metrics: new DecisionMetrics(new Registry(), () => 0), logger: silentLogger(), decisionLog: null });
    return createCheckHandler({ service: service as DecisionService, answers: extAuthzBoundary(boundary), userHeader: 'x-user-reference', maxMessageBytes: 65536, timeoutMs: 60_000, deadlines: new DeadlineQueue(), callerDeadlines });
  }

  it('a decision slower than answerBy: the deadline denial at answerBy, long before --upstream-timeout-ms', async () => {
    const handle = handlerWith({ cached: () => undefined, decide: () => new Promise(() => undefined) });
    const reply = recorder(performance.now() + 500);
    handle.request(request(), reply);
    expect(reply.replies).toHaveLength(0);
    await vi.waitFor(() => expect(reply.replies).toHaveLength(1), { timeout: 5000, interval: 5 });
    const res = decode(reply.replies[0]!);
    expect(res.status?.code).toBe(14);
    expect(headersOf(res)['x-consent-decision-error']).toBe('upstream_timeout');
  });

  it('no time left: denied at once, no decision asked for', () => {
    let asked = 0;
    const handle = handlerWith({
      cached: () => undefined,
      decide: () => {
        asked++;
        return new Promise(() => undefined);
      },
    });
    const reply = recorder(performance.now() - 1);
    handle.request(request(), reply);
    expect(reply.replies).toHaveLength(1);
    expect(headersOf(decode(reply.replies[0]!))['x-consent-decision-error']).toBe('upstream_timeout');
    expect(asked).toBe(0);
  });

  it('a decision within answerBy is answered, and its deadline taken back', async () => {
    const queues = new Map<number, WatchedDeadlines>();
    class WatchedQueues extends DeadlineQueues {
      override for(ms: number): DeadlineQueue {
        let q = queues.get(ms);
        if (q === undefined) queues.set(ms, (q = new WatchedDeadlines()));
        return q;
      }
    }
    let settle = (_: Answer): void => undefined;
    const handle = handlerWith({ cached: () => undefined, decide: () => new Promise<Answer>((r) => (settle = r)) }, new WatchedQueues());
    const reply = recorder(performance.now() + 10_000);
    handle.request(request(), reply);
    expect([...queues.keys()]).toHaveLength(1);
    expect([...queues.keys()][0]).toBeLessThanOrEqual(10_000);
    expect([...queues.values()][0]!.live.size).toBe(1);
    const body = '{"decision":"DENY","reason":"evaluated"}' as const;
    settle({ status: 200, decision: 'deny', source: 'upstream', body, bodyBytes: body.length });
    await vi.waitFor(() => expect(reply.replies).toHaveLength(1), PATIENTLY);
    expect(decode(reply.replies[0]!).status?.code).toBe(7);
    expect([...queues.values()][0]!.live.size).toBe(0);
  });
});

let upstream: ScriptedUpstream | undefined;
let sidecar: TestSidecar | undefined;
let client: GrpcClient | undefined;
const closers: (() => void)[] = [];

afterEach(async () => {
  for (const c of closers.splice(0)) c();
  client?.close();
  await sidecar?.close();
  await upstream?.close();
  [client, sidecar, upstream] = [undefined, undefined, undefined];
});

/** A service holding each check until the test releases it (or 1,500 ms pass), then ALLOW. */
async function setup(flags: Record<string, string> = {}) {
  let release = (): void => undefined;
  const held = new Promise<void>((r) => (release = r));
  const fallback = setTimeout(release, 1500);
  closers.push(() => clearTimeout(fallback));
  let released = false;
  upstream = await startUpstream((r) => ({ hold: held, body: allow((JSON.parse(r.body) as { configKey: string }).configKey, Date.now() + 60_000) }));
  sidecar = await startTestSidecar(upstream.url, { 'grpc-listen': '127.0.0.1:0', ...flags });
  const target = sidecar.handle.urls.grpc!;
  const session = await h2Connect(target);
  closers.push(() => session.close());
  client = new GrpcClient(target);
  const u = upstream;
  return {
    u,
    s: sidecar,
    c: client,
    release: () => {
      released = true;
      release();
    },
    released: () => released,
    /** A Check on a raw HTTP/2 stream, `grpc-timeout` as given (or none). */
    call: (user: string, grpcTimeout?: string) =>
      rawCall(session, { headers: grpcTimeout === undefined ? {} : { 'grpc-timeout': grpcTimeout }, chunks: [grpcFrame(checkRequestBytes(checkRequest({ 'x-user-reference': user }, { configKey: KEY })))] }).answer,
    checksFor: (user: string) => u.requests.filter((r) => r.url === CHECK_PATH && (JSON.parse(r.body) as { userReference: string }).userReference === user).length,
  };
}

/** The call ended as a successful gRPC call carrying the deadline's denial: 503 upstream_timeout. */
function expectDeadlineDenial(a: RawAnswer): void {
  expect(a.rstCode).toBe(0);
  expect(a.httpStatus).toBe(200);
  expect(a.grpcStatus).toBe(0);
  const res = checkResponseOf(a);
  expect(res.status?.code).toBe(14);
  expect(res.http_response).toBe('denied_response');
  expect(res.denied_response!.status!.code).toBe('ServiceUnavailable');
  expect(headersOf(res)).toMatchObject({ 'x-consent-decision-error': 'upstream_timeout', 'x-consent-decision-source': 'fail-closed' });
}

describe('gRPC ext_authz: the grpc-timeout header', () => {
  it('300m against a service still holding the check: the deadline denial (status OK) while it holds; the decision still comes and is cached', async () => {
    const { u, s, call, release, released } = await setup();
    const answer = call('slow-1', '300m');
    await u.waitForCount(1);
    const a = await answer;
    // Answered while the service still held the check: by the caller's timeout, not the sidecar's 2 s.
    expect(released()).toBe(false);
    expectDeadlineDenial(a);
    expect(await s.metric('consent_sidecar_fail_closed_total', { cause: 'upstream_timeout' })).toBe(1);
    // The decision asked for is not cut short: it completes and the next call has it from the cache.
    release();
    await vi.waitFor(async () => {
      const next = checkResponseOf(await call('slow-1'));
      expect(next.status?.code ?? 0).toBe(0);
      expect(metadataOf(next).source).toBe('cache');
    }, PATIENTLY);
    expect(u.checks).toBe(1);
  });

  it('a grpc-js client with a deadline (it sends grpc-timeout) gets the denial before its own deadline: never DEADLINE_EXCEEDED', async () => {
    const { u, c, release } = await setup();
    const r = await c.check(checkRequest({ 'x-user-reference': 'slow-2' }, { configKey: KEY }), { deadline: Date.now() + 1000 });
    expect(r.err).toBeUndefined();
    expect(r.res!.status?.code).toBe(14);
    expect(headersOf(r.res!)['x-consent-decision-error']).toBe('upstream_timeout');
    expect(u.checks).toBe(1);
    release();
  });

  it('a header not well-formed, or longer than --upstream-timeout-ms, is ignored: the call waits for the decision', async () => {
    const { u, call, release, released } = await setup();
    const values = ['000000001m', '1', '1mm', '1.5m', '-1m', '1x', '1h', 'm', '1H', '99999999S'];
    const answered: string[] = [];
    const answers = values.map((v, i) => call(`ignored-${i}`, v).then((a) => (answered.push(v), { a, atRelease: released() })));
    await u.waitForCount(values.length);
    // Each, were it read as a short timeout, would have been answered by now.
    await new Promise((r) => setTimeout(r, 150));
    expect(answered).toEqual([]);
    release();
    for (const { a, atRelease } of await Promise.all(answers)) {
      expect(atRelease).toBe(true);
      expect(a.grpcStatus).toBe(0);
      const res = checkResponseOf(a);
      expect(res.status?.code ?? 0).toBe(0);
      expect(metadataOf(res)).toMatchObject({ decision: 'ALLOW', source: 'upstream' });
    }
  });

  it('a timeout that leaves no time: a miss is denied at once, no decision asked; a cache hit is still ALLOW', async () => {
    const { u, call, release } = await setup();
    expectDeadlineDenial(await call('tiny-1', '1n'));
    expectDeadlineDenial(await call('tiny-1', '0m'));
    expect(u.checks).toBe(0);
    // Cached by a call without the header, then asked for with a tiny timeout: the cache answers at once.
    release();
    expect(checkResponseOf(await call('tiny-1')).status?.code ?? 0).toBe(0);
    for (const v of ['1n', '0m', '1u']) {
      const a = await call('tiny-1', v);
      expect(a.grpcStatus).toBe(0);
      const res = checkResponseOf(a);
      expect(res.status?.code ?? 0).toBe(0);
      expect(metadataOf(res)).toMatchObject({ decision: 'ALLOW', source: 'cache' });
    }
    expect(u.checks).toBe(1);
  });
});
