import type { CacheConfig } from '../config/index.js';

/**
 * How far ahead of what its `Date` header says the service's clock may be (ms): the header has
 * one-second resolution and is truncated, so `12:00:00` was sent at some instant of that second.
 */
export const DATE_RESOLUTION_SLACK_MS = 999;

/**
 * When a cached ALLOW must die: `validUntil` minus the safety margin, earlier by the skew when
 * the service's `Date` shows the local clock behind, and never later than `now + maxTtlMs`. The
 * `Date` is read against us (as the latest instant of its second), so a zero safety margin still
 * never outlives `validUntil` on the service's clock.
 */
export function deathOf(
  validUntil: number,
  nowMs: number,
  serviceNowMs: number | undefined,
  cfg: Pick<CacheConfig, 'safetyMarginMs' | 'maxTtlMs'>,
): number {
  const behindMs = serviceNowMs === undefined ? 0 : Math.max(0, serviceNowMs + DATE_RESOLUTION_SLACK_MS - nowMs);
  return Math.min(validUntil - behindMs - cfg.safetyMarginMs, nowMs + cfg.maxTtlMs);
}
