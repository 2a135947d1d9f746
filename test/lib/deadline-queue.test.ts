import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Deadline, DeadlineQueue } from '../../src/lib/deadline-queue.js';

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
});
afterEach(() => {
  vi.useRealTimers();
});

class Entry extends Deadline {
  constructor(
    deadline: number,
    private readonly fired: string[],
    private readonly name: string,
  ) {
    super(deadline);
  }

  timeout(): void {
    this.fired.push(this.name);
  }
}

function entry(deadline: number, fired: string[], name: string): Entry {
  return new Entry(deadline, fired, name);
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
    q.remove(b); // answered in time
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
      q.remove(e);
    }
    vi.advanceTimersByTime(60);
    expect(fired).toEqual([]);
    q.add(entry(performance.now() + 10, fired, 'late'));
    vi.advanceTimersByTime(10);
    expect(fired).toEqual(['late']);
  });

  it('holds only work in flight: an entry removed is released at once, not when the oldest deadline passes', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const q = new DeadlineQueue();
    const fired: string[] = [];
    const slow = entry(performance.now() + 2000, fired, 'slow');
    q.add(slow);
    // Made in a function of its own: no entry stays in this frame's registers.
    const work = (i: number): WeakRef<Entry> => {
      const e = entry(performance.now() + 2000, fired, `e${i}`);
      q.add(e);
      q.remove(e);
      return new WeakRef(e);
    };
    const finished = Array.from({ length: 100 }, (_, i) => work(i));
    // A WeakRef target made in this job is kept until it ends.
    await new Promise((resolve) => setImmediate(resolve));
    gc();
    expect(finished.filter((r) => r.deref() !== undefined)).toHaveLength(0);
    vi.advanceTimersByTime(2000);
    expect(fired).toEqual(['slow']);
  });

  it('removes from the front, the middle and the back, and an entry twice or never added is a no-op', () => {
    const q = new DeadlineQueue();
    const fired: string[] = [];
    const t0 = performance.now();
    const es = ['a', 'b', 'c', 'd', 'e'].map((n, i) => entry(t0 + 10 * (i + 1), fired, n));
    for (const e of es) q.add(e);
    q.add(es[0]!); // already queued: not twice
    q.remove(es[0]!);
    q.remove(es[2]!);
    q.remove(es[4]!);
    q.remove(es[4]!);
    q.remove(entry(t0, fired, 'never'));
    vi.advanceTimersByTime(100);
    expect(fired).toEqual(['b', 'd']);
    // Timed out entries have left: removing them now changes nothing, and the queue still works.
    q.remove(es[1]!);
    q.add(entry(performance.now() + 5, fired, 'f'));
    vi.advanceTimersByTime(5);
    expect(fired).toEqual(['b', 'd', 'f']);
  });
});
