import { describe, expect, it } from 'vitest';
import {
  AllowCache,
  CircuitBreaker,
  DecisionError,
  DecisionMetrics,
  DecisionService,
  PreEvaluationLog,
  type BreakerState,
  type CheckTransport,
  type UpstreamResponse,
} from '../../src/decision/index.js';
import { createRegistry, silentLogger } from '../../src/observability/index.js';
import { sampleOf } from '../helpers/sidecar.js';

// What the decision service tells its circuit breaker, against a scripted stand-in of the transport
// it owns (CheckTransport): only what the service did counts. A check the transport never sent
// (ERR_OVERLOADED: it could not be sent in time) is no failure, no success, and no call to the service.

const T0 = 1_767_225_600_000;
const THRESHOLD = 3;

/** A transport that ends each call the way the test says, in order. */
class ScriptedTransport implements CheckTransport {
  calls = 0;
  constructor(private readonly next: (n: number) => UpstreamResponse | DecisionError) {}
  check(): Promise<UpstreamResponse> {
    const r = this.next(this.calls++);
    return r instanceof DecisionError ? Promise.reject(r) : Promise.resolve(r);
  }
}

const OVERLOADED = new DecisionError('ERR_OVERLOADED', 'not sent: waited for a connection');
const TIMED_OUT = new DecisionError('ERR_UPSTREAM_TIMEOUT', 'no answer within 2000 ms');
/** A timeout of a check sent with too little of its deadline left (it waited in the sidecar first). */
const TIMED_OUT_SENT_LATE = new DecisionError('ERR_UPSTREAM_TIMEOUT', 'no answer within the 2000 ms deadline, sent with 650 ms of it left', { sentLate: true });
const allowFor = (configKey: string): UpstreamResponse => ({ status: 200, date: undefined, body: JSON.stringify({ decision: 'ALLOW', configKey, validUntil: T0 + 600_000 }) });

function setup(next: (n: number) => UpstreamResponse | DecisionError) {
  let t = T0;
  const registry = createRegistry();
  const metrics = new DecisionMetrics(registry, () => 0);
  const states: BreakerState[] = [];
  const breaker = new CircuitBreaker({ failureThreshold: THRESHOLD, cooldownMs: 1000, now: () => t, onStateChange: (s) => states.push(s) });
  const transport = new ScriptedTransport(next);
  const service = new DecisionService({
    transport,
    cache: new AllowCache({ maxEntries: 100, safetyMarginMs: 0, maxTtlMs: 3_600_000 }, () => t),
    cacheConfig: { maxEntries: 100, safetyMarginMs: 0, maxTtlMs: 3_600_000 },
    breaker,
    metrics,
    preEvaluationLog: new PreEvaluationLog(silentLogger(), 60_000, () => t),
    maxInFlight: 10_000,
    now: () => t,
  });
  /** One miss for a key of its own: the decision, or the code it failed with. */
  const ask = async (i: number): Promise<string> => {
    try {
      return (await service.decide({ userReference: `u${i}`, configKey: 'k' })).decision;
    } catch (err) {
      return (err as DecisionError).code;
    }
  };
  const upstreamCalls = async (): Promise<number> => sampleOf(await registry.metrics(), 'consent_sidecar_upstream_request_duration_seconds_count');
  return { service, breaker, states, transport, ask, upstreamCalls, advance: (ms: number) => (t += ms) };
}

describe('DecisionService and its circuit breaker', () => {
  it('a thousand checks never sent (overload) leave the breaker closed and are no calls to the service; the next answer is served', async () => {
    const { breaker, states, ask, upstreamCalls } = setup((n) => (n < 1000 ? OVERLOADED : allowFor('k')));
    const outcomes = await Promise.all(Array.from({ length: 1000 }, (_, i) => ask(i)));
    expect(outcomes).toEqual(Array(1000).fill('ERR_OVERLOADED'));
    expect(breaker.state).toBe('closed');
    expect(states).toEqual([]);
    expect(await upstreamCalls()).toBe(0);
    expect(await ask(1000)).toBe('allow');
    expect(await upstreamCalls()).toBe(1);
  });

  it('timeouts of checks the service was sent do open it (the same count, the other cause)', async () => {
    const { breaker, ask, upstreamCalls } = setup(() => TIMED_OUT);
    for (let i = 0; i < THRESHOLD; i++) expect(await ask(i)).toBe('ERR_UPSTREAM_TIMEOUT');
    expect(breaker.state).toBe('open');
    expect(await upstreamCalls()).toBe(THRESHOLD);
    expect(await ask(99)).toBe('ERR_CIRCUIT_OPEN');
  });

  it('overloads between failures neither reset nor add to the count', async () => {
    const script = [TIMED_OUT, TIMED_OUT, OVERLOADED, OVERLOADED, OVERLOADED, TIMED_OUT];
    const { breaker, ask } = setup((n) => script[n]!);
    for (let i = 0; i < script.length - 1; i++) await ask(i);
    expect(breaker.state).toBe('closed');
    await ask(script.length - 1);
    expect(breaker.state).toBe('open');
  });

  it.each([
    ['could not be sent (overload): it does not close the breaker', OVERLOADED, 'ERR_OVERLOADED'],
    ['was sent late and timed out: it neither closes nor reopens the breaker', TIMED_OUT_SENT_LATE, 'ERR_UPSTREAM_TIMEOUT'],
  ] as const)('a half-open probe that %s; the next check is the probe, and only the service closes it', async (_what, probeError, code) => {
    const script = [TIMED_OUT, TIMED_OUT, TIMED_OUT, probeError];
    const { breaker, states, ask, advance, transport } = setup((n) => script[n] ?? allowFor('k'));
    for (let i = 0; i < THRESHOLD; i++) await ask(i);
    advance(1000);
    expect(await ask(10)).toBe(code);
    expect(breaker.state).toBe('half_open');
    expect(await ask(11)).toBe('allow');
    expect(transport.calls).toBe(5);
    expect(states).toEqual(['open', 'half_open', 'closed']);
  });

  it('timeouts of checks sent late are the app\'s upstream_timeout and calls to the service, but neither add to nor reset the count', async () => {
    const script = [TIMED_OUT, TIMED_OUT, ...Array<DecisionError>(10).fill(TIMED_OUT_SENT_LATE), TIMED_OUT];
    const { breaker, states, ask, upstreamCalls } = setup((n) => script[n]!);
    for (let i = 0; i < script.length - 1; i++) expect(await ask(i)).toBe('ERR_UPSTREAM_TIMEOUT');
    expect(breaker.state).toBe('closed');
    expect(states).toEqual([]);
    expect(await upstreamCalls()).toBe(script.length - 1);
    await ask(script.length - 1);
    expect(breaker.state).toBe('open');
  });
});
