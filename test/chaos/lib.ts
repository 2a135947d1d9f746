import { setTimeout as sleep } from 'node:timers/promises';

export { sleep };

/** A seeded generator (mulberry32): the same seed gives the same schedule of faults and targets. */
export class Rng {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** Uniform in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Uniform in [min, max). */
  between(min: number, max: number): number {
    return min + (max - min) * this.next();
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }

  /** A shuffled copy (Fisher–Yates). */
  shuffle<T>(items: readonly T[]): T[] {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      [out[i], out[j]] = [out[j]!, out[i]!];
    }
    return out;
  }

  /** A generator of its own, derived from this one's seed and `salt` (one stream per actor). */
  fork(salt: number): Rng {
    return new Rng((this.state ^ Math.imul(salt + 1, 0x9e3779b1)) >>> 0);
  }
}

/**
 * Polls `condition` every `intervalMs` until it is true (returns true) or `deadline` (epoch ms)
 * passes (returns false). A condition that throws counts as false.
 */
export async function until(condition: () => boolean | Promise<boolean>, deadline: number, intervalMs = 100): Promise<boolean> {
  for (;;) {
    try {
      if (await condition()) return true;
    } catch {
      // not yet
    }
    if (Date.now() >= deadline) return false;
    await sleep(intervalMs);
  }
}

/** The q-th quantile (0..1) of `values` (nearest rank), or undefined when empty. */
export function quantile(values: readonly number[], q: number): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

/** A window of time (epoch ms), closed. */
export interface Window {
  readonly start: number;
  readonly end: number;
}

export const overlaps = (a: Window, b: Window): boolean => a.start <= b.end && b.start <= a.end;

/** At most `limit` holders at once; the others wait in order. */
export class Semaphore {
  private held = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly limit: number) {}

  async use<T>(work: () => Promise<T>): Promise<T> {
    if (this.held >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.held++;
    try {
      return await work();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.held--;
    }
  }
}
