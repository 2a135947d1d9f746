import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { staticSecret } from '../../src/config/index.js';
import {
  AllowCache,
  CircuitBreaker,
  DecisionError,
  DecisionMetrics,
  DecisionService,
  PreEvaluationLog,
  UpstreamClient,
  causeOf,
  type BreakerState,
} from '../../src/decision/index.js';
import { createRegistry, silentLogger } from '../../src/observability/index.js';
import { eventually } from '../helpers/wait.js';

// Finding: time a check spent in the admission queue must not open the breaker. A check sent late
// (after waiting for a connection inside the sidecar) that then meets a short pause of the service
// times out although a check sent at the start of its deadline would have been answered: that is
// not the service failing, so the breaker must not count it. A timeout of a check the service had a
// fair budget for still counts. The service is a real loopback server that holds every check until
// the test answers it; the deadlines run on frozen time (setTimeout and performance.now() are the
// test's), the sockets are real, so every step waits for a condition, never for a duration.

const TIMEOUT_MS = 2000;
const VALID_UNTIL = Date.now() + 3_600_000;

let server: Server | undefined;
let client: UpstreamClient | undefined;
afterEach(async () => {
  vi.useRealTimers();
  await client?.destroy();
  server?.closeAllConnections();
  await new Promise((r) => (server ? server.close(r) : r(undefined)));
  server = client = undefined;
});

/** Lets real I/O run (timers stay frozen) until `done()` holds. */
async function ioUntil(done: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 20_000 && !done(); i++) await new Promise((r) => setImmediate(r));
  if (!done()) throw new Error(`${what}: not reached while time stood still`);
}

/** Lets the I/O already under way settle (a few turns of the loop), timers frozen. */
async function ioSettles(): Promise<void> {
  for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));
}

/** A service that holds every check until the test answers it; `seen[i]` is the userReference of the i-th it received. */
async function holdingService(closeEach: boolean) {
  const held: ServerResponse[] = [];
  const seen: string[] = [];
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const { userReference, configKey } = JSON.parse(body) as { userReference: string; configKey: string };
      seen.push(userReference);
      held.push(res);
      (res as ServerResponse & { configKey?: string }).configKey = configKey;
    });
  });
  let opened = 0;
  server.on('connection', () => opened++);
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const answer = (i: number): void => {
    const res = held[i]! as ServerResponse & { configKey: string };
    res.writeHead(200, { 'content-type': 'application/json', ...(closeEach ? { connection: 'close' } : {}) }).end(JSON.stringify({ decision: 'ALLOW', configKey: res.configKey, validUntil: VALID_UNTIL }));
  };
  return { base, seen, answer, opened: () => opened };
}

async function setup(connections: number, closeEach: boolean) {
  const svc = await holdingService(closeEach);
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  client = new UpstreamClient({ baseUrl: new URL(svc.base), apiKey: staticSecret('k', 'test'), timeoutMs: TIMEOUT_MS }, { connections });
  const states: BreakerState[] = [];
  const breaker = new CircuitBreaker({ failureThreshold: connections, cooldownMs: 5000, onStateChange: (s) => states.push(s) });
  const cacheConfig = { maxEntries: 1000, safetyMarginMs: 0, maxTtlMs: 3_600_000 };
  const service = new DecisionService({
    transport: client,
    cache: new AllowCache(cacheConfig),
    cacheConfig,
    breaker,
    metrics: new DecisionMetrics(createRegistry(), () => 0),
    preEvaluationLog: new PreEvaluationLog(silentLogger(), 60_000),
    maxInFlight: 10_000,
  });
  /** One miss for a key of its own; its outcome: the decision, or the fail-closed cause. */
  const outcomes = new Map<string, string>();
  const ask = (user: string): Promise<string> => {
    const p = service.decide({ userReference: user, configKey: 'k' }).then(
      (a) => a.decision,
      (err: unknown) => {
        expect(err).toBeInstanceOf(DecisionError);
        return causeOf(err);
      },
    );
    void p.then((o) => outcomes.set(user, o));
    return p;
  };
  return { ...svc, breaker, states, ask, outcomes };
}

/**
 * `connections` checks per round: a burst of six rounds at t = 0, five answered 250 ms apart, and
 * the service pausing for the sixth, sent at 1250 ms with 750 ms of its 2000 ms deadline left. The
 * breaker opens after `connections` consecutive failures: as many as the late-sent checks.
 * `closeEach`: the service closes every connection it answered on, so each check sent after the
 * first round must open a new connection.
 */
async function burstThenPause(connections: number, closeEach: boolean): Promise<void> {
  const THRESHOLD = connections;
  const { seen, answer, opened, breaker, states, ask, outcomes } = await setup(connections, closeEach);
  // No answer timed yet: the service is reckoned at 250 ms, so 6 × connections checks fit: one
  // round is sent and five wait (the bound is connections × (⌊2000/250⌋ − 2)).
  const total = 6 * connections;
  const burst = Array.from({ length: total }, (_, i) => ask(`u${i}`));
  await ioUntil(() => seen.length === connections, 'the first round reached the service');

  // The service answers each round in 250 ms: the estimate stays 250 ms, so a waiting check is
  // sent while more than 500 ms of its deadline are left. Rounds are sent at 250, 500, 750, 1000
  // and 1250 ms; the last one with 750 ms left, less than half the deadline.
  for (let round = 1; round <= 5; round++) {
    vi.advanceTimersByTime(250);
    for (let i = seen.length - connections; i < seen.length; i++) answer(i);
    await ioUntil(() => seen.length === connections * (round + 1), `round ${round} reached the service`);
  }
  expect(seen).toEqual(Array.from({ length: total }, (_, i) => `u${i}`));
  // Kept alive, the first round's connections carry every round; closed, each check had its own.
  expect(opened()).toBe(closeEach ? total : connections);
  await ioUntil(() => outcomes.size === total - connections, 'the answered checks decided');
  expect([...outcomes.values()]).toEqual(Array(total - connections).fill('allow'));

  // The service pauses: the last round, sent at 1250 ms, is not answered within its deadline.
  vi.advanceTimersByTime(749);
  await ioSettles();
  expect(outcomes.size).toBe(total - connections);
  vi.advanceTimersByTime(1);
  const late = await eventually(Promise.all(burst.slice(total - connections)), 'the late-sent checks timed out');
  // The app still gets a fail-closed denial for them, as for any timeout of a check that was sent.
  expect(late).toEqual(Array(connections).fill('upstream_timeout'));
  // They are as many as the threshold, yet the breaker stays closed: the service had 750 ms of a 2000 ms deadline.
  expect(breaker.state).toBe('closed');
  expect(states).toEqual([]);

  // A fresh key still reaches the service (no circuit_open) and is answered.
  const fresh = ask('fresh');
  await ioUntil(() => seen.length === total + 1, 'the fresh key reached the service');
  expect(seen[total]).toBe('fresh');
  answer(total);
  expect(await eventually(fresh, 'the fresh key answered')).toBe('allow');

  // Timeouts of checks sent at once, with the whole deadline, still count: THRESHOLD of them open it.
  const full = Array.from({ length: THRESHOLD }, (_, i) => ask(`full${i}`));
  await ioUntil(() => seen.length === total + 1 + THRESHOLD, 'the full-budget checks reached the service');
  vi.advanceTimersByTime(TIMEOUT_MS);
  expect(await eventually(Promise.all(full), 'the full-budget checks timed out')).toEqual(Array(THRESHOLD).fill('upstream_timeout'));
  expect(breaker.state).toBe('open');
  expect(states).toEqual(['open']);
  expect(await ask('after')).toBe('circuit_open');
}

describe('a check sent late (it waited for a connection in the sidecar) whose timeout the service had no fair budget for', () => {
  it('ends upstream_timeout for the app but is not counted by the breaker: a fresh key still reaches the service; a timeout with the whole deadline still counts', async () => {
    await burstThenPause(2, false);
  });

  it('the same when each late-sent check must open a new connection to the service', async () => {
    await burstThenPause(3, true);
  });
});
