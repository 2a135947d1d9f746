import { performance as perfHooks } from 'node:perf_hooks';
import { vi } from 'vitest';

/**
 * The model's clock: vitest's fake timers drive `setTimeout`, `setInterval`, `Date.now` and the
 * global `performance.now`, and `performance.now` of node:perf_hooks (which src/ imports, and
 * which fake timers do not replace) is pointed at the same fake clock. Nothing waits for real
 * time: a run is a sequence of commands, each followed by {@link ModelClock.settle}.
 */
export interface ModelClock {
  /** Runs every microtask that is ready (promise chains, queued messages), no timer. */
  settle(): Promise<void>;
  /** Moves the clock on `ms`, firing the timers due on the way, each followed by its microtasks. */
  advance(ms: number): Promise<void>;
  /** Real timers again; the timers left by a run are dropped. */
  restore(): void;
}

/** Fixed start of every run (epoch ms): signed timestamps and retentions count from here. */
export const MODEL_EPOCH_MS = Date.UTC(2026, 0, 1);

export function useModelClock(): ModelClock {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date', 'performance'], now: MODEL_EPOCH_MS });
  const spy = vi.spyOn(perfHooks, 'now').mockImplementation(() => globalThis.performance.now());
  // setImmediate stays real: it runs after every ready microtask, and fake timers use it between timers.
  const settle = async (): Promise<void> => {
    await new Promise<void>((resolve) => setImmediate(resolve));
    await new Promise<void>((resolve) => setImmediate(resolve));
  };
  return {
    settle,
    advance: async (ms) => {
      await settle();
      await vi.advanceTimersByTimeAsync(ms);
      await settle();
    },
    restore: () => {
      vi.clearAllTimers();
      spy.mockRestore();
      vi.useRealTimers();
    },
  };
}
