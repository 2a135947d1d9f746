import { request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatorHandle } from '../../src/simulator/index.js';
import { check } from '../helpers/simulator.js';

const KEY = 'k_faults';
const ALICE = { userReference: 'alice', configKey: 'marketing-email' };
let sim: SimulatorHandle | undefined;
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

describe('fault injection on the check', () => {
  it('answers an error status for N requests, then recovers', async () => {
    sim = await startSimulator({ apiKey: KEY });
    sim.injectFault({ status: 503, count: 2 });
    expect((await check(sim.url, KEY, ALICE)).status).toBe(503);
    expect((await check(sim.url, KEY, ALICE)).status).toBe(503);
    expect((await check(sim.url, KEY, ALICE)).body.decision).toBe('ALLOW');
  });

  it('adds latency until cleared, plus the configured base latency', async () => {
    sim = await startSimulator({ apiKey: KEY, latencyMs: 30 });
    let t = Date.now();
    await check(sim.url, KEY, ALICE);
    expect(Date.now() - t).toBeGreaterThanOrEqual(29);
    sim.injectFault({ latencyMs: 400 });
    for (let i = 0; i < 2; i++) {
      t = Date.now();
      await check(sim.url, KEY, ALICE);
      expect(Date.now() - t).toBeGreaterThanOrEqual(429);
    }
    // Cleared, it adds nothing: with ten minutes of latency injected and then cleared, a check that is
    // answered at all was not held by it (was: answered in less than 400 ms, a timing bound that a
    // busy machine broke).
    sim.injectFault({ latencyMs: 600_000 });
    sim.clearFaults();
    expect((await check(sim.url, KEY, ALICE)).body.decision).toBe('ALLOW');
  });

  it('resets the connection', async () => {
    sim = await startSimulator({ apiKey: KEY });
    sim.injectFault({ reset: true, count: 1 });
    await expect(check(sim.url, KEY, ALICE)).rejects.toThrow();
    expect((await check(sim.url, KEY, ALICE)).status).toBe(200);
  });

  it('sends a malformed body', async () => {
    sim = await startSimulator({ apiKey: KEY });
    sim.injectFault({ malformed: true, count: 1 });
    const res = await check(sim.url, KEY, ALICE);
    expect(res.status).toBe(200);
    expect(() => JSON.parse(res.text)).toThrow();
  });

  it('trickles the body one byte at a time', async () => {
    sim = await startSimulator({ apiKey: KEY });
    sim.injectFault({ trickleMs: 5, count: 1 });
    const chunks: number[] = [];
    const body = JSON.stringify(ALICE);
    const text = await new Promise<string>((resolve, reject) => {
      const req = request(`${sim!.url}/v1/authorization/check`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      });
      req.on('response', (res) => {
        let all = '';
        res.on('data', (c: Buffer) => {
          chunks.push(c.length);
          all += c.toString();
        });
        res.on('end', () => resolve(all));
      });
      req.on('error', reject);
      req.end(body);
    });
    expect(JSON.parse(text).decision).toBe('ALLOW');
    expect(chunks.length).toBeGreaterThan(10);
    expect(Math.max(...chunks)).toBe(1);
  });

  it('rejects a bad fault spec naming the field', () => {
    return startSimulator().then(async (s) => {
      sim = s;
      expect(() => s.injectFault({ status: 42 })).toThrow(/status/);
      expect(() => s.injectFault({ bogus: 1 } as never)).toThrow(/bogus: unknown field/);
    });
  });
});
