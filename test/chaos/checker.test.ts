import { describe, expect, it } from 'vitest';
import { causeOf, lateAfterRedis, type Arrival, type Cause } from './checker.js';
import type { Fault } from './nemesis.js';
import type { SentEvent } from './sender.js';

/**
 * The chaos run's checker decides what fails `npm run chaos`; its attribution is checked here
 * (the run itself is not part of `npm test`). Times are ms from an arbitrary origin.
 */
const fault = (kind: Fault['kind'], start: number, end: number, target?: number, at = start): Fault => ({ kind, start, end, at, ...(target !== undefined ? { target } : {}) });
const copy = (app: number, at: number): Arrival => ({ app, at, accepted: true });

describe('causeOf: why an event was accepted twice', () => {
  const cases: { name: string; copies: Arrival[]; faults: Fault[]; cause: Cause }[] = [
    // The signal is sent at 9 950 and the process is seen gone at 10 030: the forward came in between.
    { name: 'its replica died right after its app took it', copies: [copy(1, 10_000), copy(2, 17_500)], faults: [fault('replica-kill', 9950, 11_000, 1, 10_030)], cause: 'replica-kill' },
    { name: 'another replica killed nearby: the kill, by its window', copies: [copy(1, 10_000), copy(2, 10_050)], faults: [fault('replica-kill', 10_020, 11_000, 2)], cause: 'replica-kill' },
    { name: 'its app hanging when it took it, even if its replica died next', copies: [copy(1, 10_000), copy(2, 12_500)], faults: [fault('app-hang', 9000, 11_000, 1), fault('replica-kill', 11_900, 13_000, 1)], cause: 'app-fail/hang' },
    { name: 'the first copy reached its app after its replica had given up', copies: [{ ...copy(0, 10_000), late: true }, copy(1, 10_500)], faults: [fault('redis-stall', 9000, 9500)], cause: 'app-late' },
    { name: 'queue: a later attempt of the entry (its worker saw the first fail) in a stall window', copies: [{ ...copy(0, 10_000), attempt: 1 }, { ...copy(0, 12_300), attempt: 2 }], faults: [fault('redis-stall', 9000, 9500)], cause: 'app-late' },
    { name: 'queue: the same attempt twice around a stall is the stall', copies: [{ ...copy(0, 10_100), attempt: 1 }, { ...copy(1, 11_400), attempt: 1 }], faults: [fault('redis-stall', 10_000, 11_000)], cause: 'redis-stall' },
    { name: 'both copies while Redis was restarting', copies: [copy(0, 10_100), copy(1, 10_102)], faults: [fault('redis-restart', 10_000, 10_300)], cause: 'redis-restart' },
    { name: 'both copies while Redis was killed (SIGKILL) and started again', copies: [copy(0, 10_100), copy(1, 10_400)], faults: [fault('redis-kill', 10_000, 10_300), fault('redis-stall', 30_000, 31_000)], cause: 'redis-kill' },
    // Seen with Sentinel: both copies came after a failover and just before a stall began.
    { name: 'both copies before a stall began, after a failover: the failover', copies: [copy(0, 18_812), copy(2, 19_000)], faults: [fault('redis-failover', 16_020, 18_270), fault('redis-stall', 19_015, 20_401)], cause: 'redis-failover' },
    { name: 'both copies around a stall', copies: [copy(0, 10_100), copy(1, 11_400)], faults: [fault('redis-stall', 10_000, 11_000), fault('redis-restart', 30_000, 30_300)], cause: 'redis-stall' },
    { name: 'nothing near', copies: [copy(0, 10_000), copy(1, 10_010)], faults: [fault('redis-stall', 40_000, 41_000)], cause: 'none' },
  ];
  for (const c of cases) it(c.name, () => expect(causeOf(c.copies, c.faults)).toBe(c.cause));

  it('a copy forwarded by a replica that deduplicated the event alone (Redis silent past the lease) is the fallback, whatever fault is near', () => {
    const faults = [fault('redis-failover', 10_000, 13_000)];
    expect(causeOf([copy(0, 14_000), copy(2, 14_100)], faults, new Set([2]))).toBe('dedup-fallback');
    expect(causeOf([copy(0, 14_000), copy(2, 14_100)], faults, new Set([1]))).toBe('redis-failover');
  });
});

describe('lateAfterRedis: queue entries stranded by a Redis fault', () => {
  const event = (id: string, ackAt: number): SentEvent => ({ id, body: '', revocation: false, createdAt: ackAt, attempts: 1, answers: {}, ackAt });
  const stall = fault('redis-stall', 10_000, 13_000);

  it('an event waiting across the end of a stall must reach an app within 2 s of it', () => {
    const arrivals = new Map([
      ['on-time', [copy(0, 14_900)]],
      ['late', [copy(0, 15_500)]],
      ['before', [copy(0, 9_500)]],
    ]);
    const out = lateAfterRedis([event('on-time', 9_000), event('late', 9_000), event('before', 9_000)], arrivals, [stall]);
    expect(out).toEqual({ late: [{ id: 'late', lateMs: 2500 }], lateExplained: 0 });
  });

  it('a replica killed while it waited explains the delay (its entries wait for the lease)', () => {
    const out = lateAfterRedis([event('late', 9_000)], new Map([['late', [copy(0, 21_000)]]]), [stall, fault('replica-kill', 13_500, 14_500, 1)]);
    expect(out).toEqual({ late: [], lateExplained: 1 });
  });
});
