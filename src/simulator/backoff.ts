/** The document: at most 8 attempts per delivery; after the eighth the delivery is terminal. */
export const MAX_DELIVERY_ATTEMPTS = 8;
/** The document: backoff starts at 1 minute. */
export const FIRST_RETRY_DELAY_MS = 60_000;
/** The document: backoff is capped at 15 minutes. */
export const MAX_RETRY_DELAY_MS = 15 * 60_000;
/** Not shown by the document; the simulator doubles and uses no jitter so timelines are predictable. */
export const RETRY_BACKOFF_FACTOR = 2;

/**
 * Service-time delay (ms) before the next attempt once `attemptsMade` attempts failed (1-based):
 * 1, 2, 4, 8, 15, 15, 15 minutes, about an hour in all; undefined after the last attempt.
 */
export function retryDelayMs(attemptsMade: number): number | undefined {
  if (attemptsMade < 1 || attemptsMade >= MAX_DELIVERY_ATTEMPTS) return undefined;
  return Math.min(FIRST_RETRY_DELAY_MS * RETRY_BACKOFF_FACTOR ** (attemptsMade - 1), MAX_RETRY_DELAY_MS);
}
