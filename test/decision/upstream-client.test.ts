import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { staticSecret } from '../../src/config/index.js';
import { UpstreamClient } from '../../src/decision/index.js';
import { eventually } from '../helpers/wait.js';

// One deadline queue and timer serve every call (issue 14): each call still ends at its own deadline.
// The deadlines run on frozen time (setTimeout and performance.now() are the test's), so "at its
// deadline, not before" is exact however busy the machine is; the sockets are real.

let server: Server | undefined;
let client: UpstreamClient | undefined;
afterEach(async () => {
  vi.useRealTimers();
  await client?.destroy();
  server?.closeAllConnections();
  await new Promise((r) => (server ? server.close(r) : r(undefined)));
  server = client = undefined;
});

/** A service that hands every request to `onRequest` with its body; it answers only when told to. */
async function service(onRequest: (body: string, req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => onRequest(body, req, res));
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Lets real I/O run (timers stay frozen) until `done()` holds. */
async function ioUntil(done: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 20_000 && !done(); i++) await new Promise((r) => setImmediate(r));
  if (!done()) throw new Error(`${what}: not reached while time stood still`);
}

/** Lets the I/O already under way settle (a few turns of the loop), timers frozen. */
async function ioSettles(): Promise<void> {
  for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));
}

type Outcome = { state: 'pending' } | { state: 'answered' } | { state: 'failed'; code: string };

function track(p: Promise<unknown>): { readonly outcome: Outcome; readonly settled: Promise<Outcome> } {
  const t: { outcome: Outcome; settled: Promise<Outcome> } = { outcome: { state: 'pending' }, settled: Promise.resolve({ state: 'pending' }) };
  t.settled = p.then(
    () => (t.outcome = { state: 'answered' }),
    (err: { code?: string }) => (t.outcome = { state: 'failed', code: err.code ?? 'other' }),
  );
  return t;
}

describe('UpstreamClient deadlines', () => {
  it('every one of many concurrent calls times out at its own deadline, batches started later included; answered calls are not disturbed', async () => {
    const seen: string[] = [];
    const base = await service((body, _req, res) => {
      seen.push(body);
      if (body.includes('fast')) res.writeHead(200, { 'content-type': 'application/json' }).end(`{"echo":${body}}`);
    });
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    client = new UpstreamClient({ baseUrl: new URL(base), apiKey: staticSecret('k', 'test'), timeoutMs: 300 }, { connections: 64 });
    const first = Array.from({ length: 20 }, (_, i) => track(client!.check(`{"slow":${i}}`)));
    const fast = Array.from({ length: 5 }, (_, i) => client!.check(`{"fast":${i}}`));
    // The fast calls are answered with no time passing at all.
    const answers = await eventually(Promise.all(fast), 'the fast calls answered');
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
    expect(answers.map((a) => JSON.parse(a.body) as unknown)).toEqual([0, 1, 2, 3, 4].map((i) => ({ echo: { fast: i } })));
    await ioUntil(() => seen.length === 25, 'the service received the first batch');

    vi.advanceTimersByTime(100);
    const second = Array.from({ length: 20 }, (_, i) => track(client!.check(`{"slow":${100 + i}}`)));
    await ioUntil(() => seen.length === 45, 'the service received the second batch');

    vi.advanceTimersByTime(199); // 299 ms into the first batch: nothing times out early
    await ioSettles();
    expect([...first, ...second].map((t) => t.outcome.state)).toEqual(Array(40).fill('pending'));
    vi.advanceTimersByTime(1); // the first batch's deadline, not yet the second's
    expect(await eventually(Promise.all(first.map((t) => t.settled)), 'the first batch ended at its deadline')).toEqual(Array(20).fill({ state: 'failed', code: 'ERR_UPSTREAM_TIMEOUT' }));
    await ioSettles();
    expect(second.map((t) => t.outcome.state)).toEqual(Array(20).fill('pending'));
    vi.advanceTimersByTime(99);
    await ioSettles();
    expect(second.map((t) => t.outcome.state)).toEqual(Array(20).fill('pending'));
    vi.advanceTimersByTime(1);
    expect(await eventually(Promise.all(second.map((t) => t.settled)), 'the second batch ended at its deadline')).toEqual(Array(20).fill({ state: 'failed', code: 'ERR_UPSTREAM_TIMEOUT' }));
    // and the client still works afterwards
    expect((await eventually(client.check('{"fast":"after"}'), 'a call after the timeouts answered')).status).toBe(200);
  });

  it('the one retry stays inside the first attempt\'s deadline: a reset 250 ms in leaves the retry 50 ms, not a fresh 300', async () => {
    const requests: IncomingMessage[] = [];
    // Nothing is ever answered: the first request is reset by hand, the retry hangs.
    const base = await service((_body, req) => void requests.push(req));
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    client = new UpstreamClient({ baseUrl: new URL(base), apiKey: staticSecret('k', 'test'), timeoutMs: 300 }, { connections: 4 });
    const call = track(client.check('{"slow":1}'));
    await ioUntil(() => requests.length === 1, 'the first attempt reached the service');
    vi.advanceTimersByTime(250);
    requests[0]!.socket.destroy(); // a reset before any response: the one retry is allowed
    await ioUntil(() => requests.length === 2, 'the retry reached the service');
    vi.advanceTimersByTime(49);
    await ioSettles();
    expect(call.outcome).toEqual({ state: 'pending' });
    vi.advanceTimersByTime(1); // 300 ms after the call began; a fresh deadline would leave 250 more
    expect(await eventually(call.settled, 'the call ended at its one deadline')).toEqual({ state: 'failed', code: 'ERR_UPSTREAM_TIMEOUT' });
  });
});

describe('UpstreamClient admission: waiting for a connection is not the service\'s time', () => {
  /** A service that holds every check until the test answers it (`answer(i)`); `seen` in arrival order. */
  async function holdingService() {
    const held: ServerResponse[] = [];
    const seen: string[] = [];
    const base = await service((body, _req, res) => {
      seen.push(body);
      held.push(res);
    });
    const answer = (i: number): void => void held[i]!.writeHead(200, { 'content-type': 'application/json' }).end(`{"echo":${seen[i]}}`);
    return { base, seen, answer };
  }

  it('checks beyond the connections and the queue bound are refused at once; waiting ones end `overload` before their deadline; only the sent ones time out', async () => {
    const { base, seen } = await holdingService();
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    client = new UpstreamClient({ baseUrl: new URL(base), apiKey: staticSecret('k', 'test'), timeoutMs: 2000 }, { connections: 2 });
    // No answer timed yet: the service is reckoned at 250 ms, so 2 × (8 − 2) = 12 checks may wait.
    const sent = [0, 1].map((i) => track(client!.check(`{"sent":${i}}`)));
    const waiting = Array.from({ length: 12 }, (_, i) => track(client!.check(`{"waiting":${i}}`)));
    const refused = track(client.check('{"refused":0}'));
    // Refused with no time passing at all.
    expect(await eventually(refused.settled, 'the refusal')).toEqual({ state: 'failed', code: 'ERR_OVERLOADED' });
    await ioUntil(() => seen.length === 2, 'the service received one check per connection');
    vi.advanceTimersByTime(1499);
    await ioSettles();
    expect([...sent, ...waiting].map((t) => t.outcome.state)).toEqual(Array(14).fill('pending'));
    vi.advanceTimersByTime(1); // two service times (2 × 250 ms) before their deadline: they could not be sent in time
    expect(await eventually(Promise.all(waiting.map((t) => t.settled)), 'the waiting checks were shed')).toEqual(Array(12).fill({ state: 'failed', code: 'ERR_OVERLOADED' }));
    await ioSettles();
    expect(sent.map((t) => t.outcome.state)).toEqual(['pending', 'pending']);
    vi.advanceTimersByTime(500);
    expect(await eventually(Promise.all(sent.map((t) => t.settled)), 'the sent checks timed out')).toEqual(Array(2).fill({ state: 'failed', code: 'ERR_UPSTREAM_TIMEOUT' }));
    expect(seen).toEqual(['{"sent":0}', '{"sent":1}']);
  });

  it('a connection let go goes to the oldest waiting check, which the service then answers', async () => {
    const { base, seen, answer } = await holdingService();
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    client = new UpstreamClient({ baseUrl: new URL(base), apiKey: staticSecret('k', 'test'), timeoutMs: 2000 }, { connections: 1 });
    const first = client.check('{"n":0}');
    const second = client.check('{"n":1}');
    const third = client.check('{"n":2}');
    await ioUntil(() => seen.length === 1, 'the first check reached the service');
    await ioSettles();
    expect(seen).toEqual(['{"n":0}']);
    answer(0);
    expect(JSON.parse((await eventually(first, 'the first answer')).body)).toEqual({ echo: { n: 0 } });
    await ioUntil(() => seen.length === 2, 'the second check reached the service');
    answer(1);
    expect(JSON.parse((await eventually(second, 'the second answer')).body)).toEqual({ echo: { n: 1 } });
    await ioUntil(() => seen.length === 3, 'the third check reached the service');
    answer(2);
    expect(JSON.parse((await eventually(third, 'the third answer')).body)).toEqual({ echo: { n: 2 } });
  });
});
