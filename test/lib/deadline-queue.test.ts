import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DeadlineQueue, type Deadline } from '../../src/lib/deadline-queue.js';

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
});
afterEach(() => {
  vi.useRealTimers();
});

function entry(deadline: number, fired: string[], name: string): Deadline {
  const e: Deadline = {
    deadline,
    settled: false,
    timeout: () => {
      e.settled = true;
      fired.push(name);
    },
  };
  return e;
}

describe('DeadlineQueue', () => {
  it('times out each unsettled entry at its deadline, in order, never a settled one, never early', () => {
    const q = new DeadlineQueue();
    const fired: string[] = [];
    const t0 = performance.now();
    const a = entry(t0 + 100, fired, 'a');
    const b = entry(t0 + 150, fired, 'b');
    const c = entry(t0 + 200, fired, 'c');
    for (const e of [a, b, c]) q.add(e);
    b.settled = true; // answered in time
    vi.advanceTimersByTime(99);
    expect(fired).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(fired).toEqual(['a']);
    vi.advanceTimersByTime(99);
    expect(fired).toEqual(['a']);
    vi.advanceTimersByTime(1);
    expect(fired).toEqual(['a', 'c']);
  });

  it('re-arms after going idle, and keeps working past thousands of settled entries', () => {
    const q = new DeadlineQueue();
    const fired: string[] = [];
    for (let i = 0; i < 5000; i++) {
      const e = entry(performance.now() + 50, fired, `s${i}`);
      q.add(e);
      e.settled = true;
    }
    vi.advanceTimersByTime(60);
    expect(fired).toEqual([]);
    q.add(entry(performance.now() + 10, fired, 'late'));
    vi.advanceTimersByTime(10);
    expect(fired).toEqual(['late']);
  });
});
