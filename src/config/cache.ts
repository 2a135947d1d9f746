import type { OptionSpec } from './option-spec.js';
import type { Reader } from './reader.js';

// The ALLOW cache: its size, how long before `validUntil` an entry dies, the longest life, refresh-ahead.

/** ALLOW cache size in entries; 0 disables the cache. */
export const DEFAULT_CACHE_MAX_ENTRIES = 100_000;
/** An entry dies this long before `validUntil` (ms). */
export const DEFAULT_CACHE_SAFETY_MARGIN_MS = 1000;
/** No entry lives longer than this (ms), whatever `validUntil` says. */
export const DEFAULT_CACHE_MAX_TTL_MS = 3_600_000;
/** Refresh-ahead window (ms): an entry read this close to its death is asked again in the background; 0 = off. */
export const DEFAULT_CACHE_REFRESH_AHEAD_MS = 0;

export const CACHE_OPTIONS: readonly OptionSpec[] = [
  {
    name: 'cache-max-entries',
    arg: '<n>',
    description: 'ALLOW cache size (0 disables the cache)',
    defaultText: String(DEFAULT_CACHE_MAX_ENTRIES),
  },
  {
    name: 'cache-safety-margin-ms',
    arg: '<ms>',
    description: 'an entry dies this long before validUntil',
    defaultText: String(DEFAULT_CACHE_SAFETY_MARGIN_MS),
  },
  {
    name: 'cache-max-ttl-ms',
    arg: '<ms>',
    description: 'no entry lives longer than this',
    defaultText: String(DEFAULT_CACHE_MAX_TTL_MS),
  },
  {
    name: 'cache-refresh-ahead-ms',
    arg: '<ms>',
    description: 'an entry read within this long of its death is asked again in the background, once (0: off)',
    defaultText: String(DEFAULT_CACHE_REFRESH_AHEAD_MS),
  },
];

/** The ALLOW cache (`--cache-*`). */
export interface CacheConfig {
  /** 0 disables the cache. */
  readonly maxEntries: number;
  readonly safetyMarginMs: number;
  readonly maxTtlMs: number;
  /** `--cache-refresh-ahead-ms`: an entry read within this long of its death is refreshed in the background; 0 or absent = off. */
  readonly refreshAheadMs?: number;
}

/** `--cache-*`. */
export function readCache(r: Reader): CacheConfig {
  const maxEntries = r.int('cache-max-entries', DEFAULT_CACHE_MAX_ENTRIES, 0, 100_000_000);
  const safetyMarginMs = r.int('cache-safety-margin-ms', DEFAULT_CACHE_SAFETY_MARGIN_MS, 0, 3_600_000);
  const maxTtlMs = r.int('cache-max-ttl-ms', DEFAULT_CACHE_MAX_TTL_MS, 1, 7 * 86_400_000);
  const refreshAheadMs = r.int('cache-refresh-ahead-ms', DEFAULT_CACHE_REFRESH_AHEAD_MS, 0, 3_600_000);
  return Object.freeze({ maxEntries, safetyMarginMs, maxTtlMs, refreshAheadMs });
}
