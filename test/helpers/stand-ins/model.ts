import type fc from 'fast-check';
import type { ModelClock } from './clock.js';

/** What a model-based test drives: a system on the model's clock that collects what it saw go wrong. */
export interface ModelSystem {
  readonly clock: ModelClock;
  readonly violations: readonly string[];
  /** Checks the invariant between commands, pushing to `violations` (optional). */
  check?(): void;
}

/**
 * One fast-check command: `run` acts on the system, the clock then settles (every timer and reply
 * due now has run), the invariant is checked, and any violation fails the run with its text.
 * `when`: the command's precondition on the model (always, by default).
 */
export function modelCommand<S extends ModelSystem, M extends object = object>(
  name: string,
  run: (s: S) => void | Promise<void>,
  when: (m: M) => boolean = () => true,
): fc.AsyncCommand<M, S> {
  return {
    check: when,
    run: async (_m, s) => {
      await run(s);
      await s.clock.settle();
      s.check?.();
      if (s.violations.length > 0) throw new Error(s.violations.join('\n'));
    },
    toString: () => name,
  };
}

/** `arb` `n` times over: its weight among `fc.commands`' choices. */
export function weighted<T>(arb: T, n: number): T[] {
  return Array.from({ length: n }, () => arb);
}
