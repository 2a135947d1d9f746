import { afterEach, describe, expect, it, vi } from 'vitest';
import { Admission, PRIOR_LATENCY_FRACTION, SEND_HEADROOM_ROUNDS, type Waiter } from '../../src/decision/index.js';

// The admission rule on its own, on a clock the test moves (its `now` and its timer are the test's):
// the queue in front of the pool holds no more than the pool can send within the deadline, and a
// check that cannot be sent in time is told so as soon as the estimate says it, not at its deadline.

afterEach(() => {
  vi.useRealTimers();
});

/** A waiting check that records what the admission did with it. */
class Probe implements Waiter {
  prevWait: Waiter | null = null;
  nextWait: Waiter | null = null;
  waiting = false;
  outcome: 'pending' | 'sent' | 'shed' = 'pending';
  why = '';
  constructor(
    readonly name: string,
    readonly deadline: number,
  ) {}
  send(): void {
    this.outcome = 'sent';
  }
  shed(why: string): void {
    this.outcome = 'shed';
    this.why = why;
  }
}

function setup(connections: number, timeoutMs: number) {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
  let t = 1_000;
  const admission = new Admission({ connections, timeoutMs, now: () => t });
  let n = 0;
  /** A check arriving now: what the admission said, and the probe. */
  const arrive = (): { said: string; p: Probe } => {
    const p = new Probe(`c${n++}`, t + timeoutMs);
    return { said: admission.enter(p), p };
  };
  const advance = (ms: number): void => {
    t += ms;
    vi.advanceTimersByTime(ms);
  };
  return { admission, arrive, advance, now: () => t };
}

describe('Admission: the bound', () => {
  it('sends up to one check per connection, queues connections × (⌊T/L⌋ − 2) more, and refuses the next at once, saying why', () => {
    const { admission, arrive } = setup(4, 2000);
    admission.observe(300); // ⌊2000/300⌋ = 6: one in flight, 4 rounds may wait, 2 rounds of headroom
    expect(admission.queueBound).toBe(4 * (6 - SEND_HEADROOM_ROUNDS));
    const said = Array.from({ length: 4 + 16 + 1 }, () => arrive().said);
    expect(said.slice(0, 4)).toEqual(['send', 'send', 'send', 'send']);
    expect(said.slice(4, 20)).toEqual(Array(16).fill('wait'));
    expect(said[20]).toMatch(/^16 checks already wait for 4 connections \(at most 16 with the service answering in ~300 ms\)$/);
    expect([admission.sending, admission.waiting]).toEqual([4, 16]);
  });

  it('before any answer is timed, reckons with a service answering in an eighth of the deadline', () => {
    const { admission } = setup(64, 2000);
    expect(admission.latencyMs).toBe(2000 * PRIOR_LATENCY_FRACTION);
    expect(admission.queueBound).toBe(64 * (8 - 2));
  });

  it('holds no queue at all when a check that waited one round could not be sent with two rounds left', () => {
    const { admission, arrive } = setup(2, 2000);
    admission.observe(700); // ⌊2000/700⌋ = 2
    expect(admission.queueBound).toBe(0);
    expect([arrive().said, arrive().said]).toEqual(['send', 'send']);
    expect(arrive().said).toMatch(/already wait/);
  });

  it('follows the service: the first answer time replaces the prior, later ones move it by an eighth', () => {
    const { admission } = setup(1, 2000);
    admission.observe(400);
    expect(admission.latencyMs).toBe(400);
    admission.observe(1200);
    expect(admission.latencyMs).toBe(500);
  });

  it('a timeout is a lower bound of an answer time: it may raise the estimate, never lower it (a late-sent check times out after a short wait)', () => {
    const { admission } = setup(4, 2000);
    admission.observe(300);
    admission.observeAtLeast(100); // a check sent with little time left: its short wait says nothing of the service's speed
    expect(admission.latencyMs).toBe(300);
    admission.observeAtLeast(300);
    expect(admission.latencyMs).toBe(300);
    admission.observeAtLeast(1100); // waited longer than the estimate with no answer: the service is slower
    expect(admission.latencyMs).toBe(300 + (1100 - 300) / 8);
  });

  it('rejects nonsense options at construction', () => {
    expect(() => new Admission({ connections: 0, timeoutMs: 1 })).toThrow(RangeError);
    expect(() => new Admission({ connections: 1, timeoutMs: 0 })).toThrow(RangeError);
  });
});

describe('Admission: waiting checks', () => {
  it('a freed connection goes to the oldest waiting check', () => {
    const { admission, arrive } = setup(1, 2000);
    admission.observe(100);
    arrive();
    const a = arrive().p;
    const b = arrive().p;
    admission.release();
    expect([a.outcome, b.outcome]).toEqual(['sent', 'pending']);
    admission.release();
    expect(b.outcome).toBe('sent');
    expect(admission.sending).toBe(1);
    admission.release();
    expect([admission.sending, admission.waiting]).toEqual([0, 0]);
  });

  it('is shed as soon as no more than two answer times of its deadline are left, not at its deadline', () => {
    const { admission, arrive, advance } = setup(1, 2000);
    admission.observe(300);
    arrive(); // holds the only connection and never lets go
    const w = arrive().p;
    advance(2000 - 2 * 300 - 1);
    expect(w.outcome).toBe('pending');
    advance(1);
    expect(w.outcome).toBe('shed');
    expect(w.why).toMatch(/waited for a connection until only 600 ms of the deadline were left, not more than 2 answer times of the service \(~300 ms\)/);
    expect(admission.waiting).toBe(0);
  });

  it('a check at the head with too little time left when a connection frees is shed, and the next one is sent', () => {
    const { admission, arrive, advance } = setup(1, 2000);
    admission.observe(300);
    arrive();
    const old = arrive().p;
    advance(500);
    const young = arrive().p;
    // The service slowed down to 500 ms: the old check must be sent with more than 1,000 ms left.
    admission.observe(300 + 8 * 200);
    expect(admission.latencyMs).toBe(500);
    advance(499); // old: 1,001 ms left
    expect(old.outcome).toBe('pending');
    advance(1); // old: 1,000 ms left, young: 1,500
    expect(old.outcome).toBe('shed');
    expect(young.outcome).toBe('pending');
    admission.release();
    expect(young.outcome).toBe('sent');
  });

  it('when the estimate grows, the newest waiting checks beyond the new bound are shed at once; the oldest keep their place', () => {
    const { admission, arrive } = setup(2, 2000);
    admission.observe(250); // ⌊8⌋ − 2 = 6 rounds: 12 may wait
    for (let i = 0; i < 2; i++) arrive();
    const waiting = Array.from({ length: 12 }, () => arrive().p);
    expect(waiting.every((w) => w.outcome === 'pending')).toBe(true);
    admission.observe(250 + 8 * 150); // 400 ms: ⌊5⌋ − 2 = 3 rounds: 6 may wait
    expect(admission.queueBound).toBe(6);
    expect(waiting.map((w) => w.outcome)).toEqual([...Array(6).fill('pending'), ...Array(6).fill('shed')]);
    expect(waiting[11]!.why).toMatch(/the service now answers in ~400 ms: 2 connections send at most 6 waiting checks in time, not 12/);
    expect(admission.waiting).toBe(6);
  });

  it('a waiting check that leaves (its deadline, shutdown) is out of the queue; drain hands over every one still there', () => {
    const { admission, arrive } = setup(1, 2000);
    admission.observe(100);
    arrive();
    const [a, b, c] = [arrive().p, arrive().p, arrive().p];
    admission.leave(b);
    expect(admission.waiting).toBe(2);
    const drained: string[] = [];
    admission.drain((w) => drained.push((w as Probe).name));
    expect(drained).toEqual([a.name, c.name]);
    expect(admission.waiting).toBe(0);
  });
});
