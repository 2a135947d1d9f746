import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { Secret, UpstreamConfig } from '../../src/config/index.js';
import { createRegistry } from '../../src/observability/index.js';
import { startSimulator, type SimulatorHandle } from '../../src/simulator/index.js';
import { classifyKeyProbeStatus, UpstreamKeyProbe, type KeyProbeOutcome } from '../../src/assembly/upstream-key-probe.js';
import { freePort } from '../helpers/ports.js';
import { capturingLogger, sampleOf } from '../helpers/sidecar.js';
import { eventually, until } from '../helpers/wait.js';

// The start-up API key check against the repository's simulator over real HTTP: its /v1/* routes
// answer 401 to a wrong key before anything else, and its faults make the check answer any status.

const WRONG = 'sk_wrong_7f3a9c';

/** A key that a test can change, as a rotated --api-key-file would. */
function mutableKey(value: string, origin = '--api-key'): Secret<string> & { set(v: string): void } {
  let current = value;
  return { current: () => current, origin, watch: () => undefined, close: () => undefined, set: (v) => (current = v) };
}

const upstreamOf = (url: string, apiKey: Secret<string>): UpstreamConfig => ({ baseUrl: new URL(url), apiKey, timeoutMs: 5000 });

let sim: SimulatorHandle | undefined;
let probe: UpstreamKeyProbe | undefined;
let stall: Server | undefined;
afterEach(async () => {
  await probe?.close();
  await sim?.close();
  if (stall) await new Promise<void>((r) => { stall!.close(() => r()); stall!.closeAllConnections(); });
  [sim, probe, stall] = [undefined, undefined, undefined];
});

function start(upstream: UpstreamConfig, retry = { firstRetryMs: 10, maxRetryMs: 40 }) {
  const log = capturingLogger('debug');
  const registry = createRegistry({ defaultMetrics: false });
  probe = new UpstreamKeyProbe({ upstream, logger: log.logger, registry, ...retry });
  probe.start();
  const events = (name: string) => log.lines().filter((l) => l.event === name);
  const gauge = async () => sampleOf(await registry.metrics(), 'consent_sidecar_upstream_api_key_rejected');
  return { log, events, gauge };
}

describe('the API key checked at start', () => {
  it.each<[number, KeyProbeOutcome]>([
    [200, 'accepted'],
    [400, 'accepted'],
    [404, 'accepted'],
    [401, 'rejected'],
    [403, 'rejected'],
    [408, 'unreachable'],
    [429, 'unreachable'],
    [500, 'unreachable'],
    [503, 'unreachable'],
  ])('HTTP %i is %s', (status, outcome) => {
    expect(classifyKeyProbeStatus(status)).toBe(outcome);
  });

  it('a right key: one check, accepted, gauge 0, no error', async () => {
    sim = await startSimulator();
    const { events, gauge, log } = start(upstreamOf(sim.url, mutableKey(sim.apiKey)));
    await until(() => events('upstream_accepts_api_key').length === 1, 'the key accepted');
    expect(probe!.outcome).toBe('accepted');
    expect(await gauge()).toBe(0);
    expect(log.lines().filter((l) => ['warn', 'error', 'fatal'].includes(String(l.level)))).toEqual([]);
  });

  it('a wrong key: error upstream_rejects_api_key naming the flag, never the key; gauge 1; probed again with backoff until the key is fixed', async () => {
    sim = await startSimulator();
    const key = mutableKey(WRONG, '--api-key-file');
    const { events, gauge, log } = start(upstreamOf(sim.url, key));
    await until(() => events('upstream_rejects_api_key').length >= 2, 'two rejections (the first and one retry)');
    const [first, second] = events('upstream_rejects_api_key');
    expect(first).toMatchObject({ level: 'error', flag: '--api-key-file', status: '401', attempt: 1, retryInMs: 10 });
    expect(second).toMatchObject({ attempt: 2, retryInMs: 20 });
    expect(String(first!.msg)).toContain('--api-key-file');
    expect(await gauge()).toBe(1);
    expect(probe!.outcome).toBe('rejected');
    // The key is fixed (a rotated Secret file): the next probe is accepted and the gauge falls.
    key.set(sim.apiKey);
    await until(() => events('upstream_accepts_api_key').length === 1, 'the fixed key accepted');
    expect(await gauge()).toBe(0);
    expect(log.raw()).not.toContain(WRONG);
    expect(log.raw()).not.toContain(sim.apiKey);
  });

  it('403 is a rejection too (the key lacks the permission to check)', async () => {
    sim = await startSimulator();
    sim.injectFault({ status: 403, count: 1 });
    const { events, gauge } = start(upstreamOf(sim.url, mutableKey(sim.apiKey)));
    await until(() => events('upstream_accepts_api_key').length === 1, 'accepted after the 403');
    expect(events('upstream_rejects_api_key').map((e) => e.status)).toEqual(['403']);
    expect(await gauge()).toBe(0);
  });

  it('a service that answers 5xx or cannot be reached is not a rejected key: warned once, gauge 0, probed again', async () => {
    sim = await startSimulator();
    sim.injectFault({ status: 503, count: 3 });
    const { events, gauge, log } = start(upstreamOf(sim.url, mutableKey(sim.apiKey)));
    await until(() => events('upstream_accepts_api_key').length === 1, 'accepted once the service answers');
    const unreachable = events('upstream_key_check_unreachable');
    expect(unreachable.map((e) => [e.cause, e.level])).toEqual([['503', 'warn'], ['503', 'debug'], ['503', 'debug']]);
    expect(events('upstream_rejects_api_key')).toEqual([]);
    expect(await gauge()).toBe(0);
    expect(log.lines().filter((l) => ['error', 'fatal'].includes(String(l.level)))).toEqual([]);
  });

  it('nothing listening: unreachable (ECONNREFUSED), never rejected', async () => {
    const port = await freePort();
    const { events, gauge } = start(upstreamOf(`http://127.0.0.1:${port}`, mutableKey(WRONG)));
    await until(() => events('upstream_key_check_unreachable').length >= 2, 'two attempts');
    expect(events('upstream_key_check_unreachable')[0]).toMatchObject({ cause: 'ECONNREFUSED', level: 'warn' });
    expect(events('upstream_rejects_api_key')).toEqual([]);
    expect(await gauge()).toBe(0);
  });

  it('the call is a check under the base URL\'s path, with the key as Bearer', async () => {
    const seen: { method?: string; url?: string; auth?: string; body: string }[] = [];
    stall = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        seen.push({ method: req.method, url: req.url, auth: req.headers.authorization, body });
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"decision":"DENY","reason":"customer_not_found"}');
      });
    });
    await new Promise<void>((r) => stall!.listen(0, '127.0.0.1', r));
    const { events } = start(upstreamOf(`http://127.0.0.1:${(stall.address() as AddressInfo).port}/api/`, mutableKey('k1')));
    await until(() => events('upstream_accepts_api_key').length === 1, 'accepted');
    expect(seen).toEqual([
      { method: 'POST', url: '/api/v1/authorization/check', auth: 'Bearer k1', body: '{"userReference":"consent-sidecar-key-probe","configKey":"consent-sidecar-key-probe"}' },
    ]);
  });

  it('a service that never answers: unreachable (timeout) after --upstream-timeout-ms, then probed again', async () => {
    let requests = 0;
    stall = createServer(() => void (requests += 1)); // never answers
    await new Promise<void>((r) => stall!.listen(0, '127.0.0.1', r));
    const { events } = start({ ...upstreamOf(`http://127.0.0.1:${(stall.address() as AddressInfo).port}`, mutableKey('k')), timeoutMs: 200 });
    await until(() => events('upstream_key_check_unreachable').length >= 2 && requests >= 2, 'two attempts timed out');
    expect(events('upstream_key_check_unreachable').slice(0, 2).map((e) => [e.cause, e.level])).toEqual([['timeout', 'warn'], ['timeout', 'debug']]);
    expect(events('upstream_rejects_api_key')).toEqual([]);
    expect(probe!.outcome).toBe('unreachable');
  });

  it('close() ends a probe in flight and any further one', async () => {
    let requests = 0;
    stall = createServer(() => void (requests += 1)); // never answers
    await new Promise<void>((r) => stall!.listen(0, '127.0.0.1', r));
    start(upstreamOf(`http://127.0.0.1:${(stall.address() as AddressInfo).port}`, mutableKey('k')));
    await until(() => requests === 1, 'the probe in flight');
    await eventually(probe!.close(), 'close() returns while the service holds the probe');
    expect(probe!.outcome).toBeUndefined();
  });
});
