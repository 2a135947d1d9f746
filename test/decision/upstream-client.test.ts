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
