import { setTimeout as delay } from 'node:timers/promises';

/**
 * How long a test waits for a condition before it gives up: a safety net for a condition that
 * never comes, not a measure of speed. Waits return as soon as their condition holds, so this can
 * be generous; a busy machine (CI shares two cores with other jobs) must not turn it into a failure.
 */
export const PATIENCE_MS = 15_000;

/** The options for `vi.waitFor` and `expect.poll` that every test uses unless it has a reason not to. */
export const PATIENTLY = { timeout: PATIENCE_MS, interval: 20 } as const;

/**
 * Polls `predicate` (sync or async) until it holds. Fails with `what` after {@link PATIENCE_MS}:
 * the message says which condition never came, not that something took too long.
 */
export async function until(predicate: () => boolean | Promise<boolean>, what = 'condition', timeoutMs = PATIENCE_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`${what}: still not true after ${timeoutMs} ms`);
    await delay(5);
  }
}

/**
 * Resolves with what `promise` gives, or fails saying `what` never happened. For a result that the
 * behaviour under test must bring about at all (a close() that would otherwise wait out a timeout
 * of minutes), not for one that must come quickly.
 */
export async function eventually<T>(promise: Promise<T>, what: string, timeoutMs = PATIENCE_MS): Promise<T> {
  const ac = new AbortController();
  const giveUp = delay(timeoutMs, undefined, { signal: ac.signal }).then(
    () => Promise.reject(new Error(`${what}: did not happen within ${timeoutMs} ms`)),
    () => undefined as never,
  );
  try {
    return await Promise.race([promise, giveUp]);
  } finally {
    ac.abort();
  }
}

/** Waits until the wall clock reads at least `epochMs` (a time window's edge, in real time). */
export async function untilWallClock(epochMs: number): Promise<void> {
  // A timer may fire a millisecond early against Date.now(); loop until the clock agrees.
  for (let left = epochMs - Date.now(); left > 0; left = epochMs - Date.now()) await delay(left);
}
