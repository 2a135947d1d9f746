import { ConfigError } from './errors.js';
import {
  DEFAULT_REDEC_MAX_LISTING_BYTES,
  DEFAULT_REDEC_MAX_PAGE_BYTES,
  DEFAULT_REDEC_MAX_RECORDS,
  DEFAULT_REDEC_RECONCILE_GRACE_MS,
  DEFAULT_REDEC_RECONCILE_INTERVAL_MS,
  DEFAULT_REDEC_RECONCILE_PAGE_LIMIT,
  DEFAULT_REDEC_RECONCILE_REPEAT_MS,
} from './options.js';
import { Reader } from './reader.js';
import type { RawEnv, RawFlags, RedecListingBounds, RedecListingFields, RedecReconcileConfig } from './types.js';

// REDEC: the listing's field names and bounds (`redec pending`), and the reconciler.

const FIELD_NAME = /^[A-Za-z0-9_.~-]{1,64}$/;

function readRedecFields(r: Reader): RedecListingFields {
  const items = r.raw('redec-items-field');
  const cursor = r.raw('redec-cursor-param');
  if (items && !FIELD_NAME.test(items.value)) r.problem(items.label, `must be 1-64 letters, digits, "_", "-", "." or "~", got "${items.value}"`);
  if (cursor && !FIELD_NAME.test(cursor.value)) r.problem(cursor.label, `must be 1-64 letters, digits, "_", "-", "." or "~", got "${cursor.value}"`);
  return Object.freeze({ itemsField: items?.value ?? null, cursorParam: cursor?.value ?? 'cursor' });
}

/** `--redec-max-page-bytes`, `--redec-max-records`, `--redec-max-listing-bytes` (issue 20). */
function readRedecBounds(r: Reader): RedecListingBounds {
  const maxPageBytes = r.int('redec-max-page-bytes', DEFAULT_REDEC_MAX_PAGE_BYTES, 1024, 1024 * 1024 * 1024);
  const maxRecords = r.int('redec-max-records', DEFAULT_REDEC_MAX_RECORDS, 1, 100_000_000);
  const maxListingBytes = r.int('redec-max-listing-bytes', DEFAULT_REDEC_MAX_LISTING_BYTES, 1024, 64 * 1024 * 1024 * 1024);
  if (maxListingBytes < maxPageBytes && !r.problems.some((p) => p.startsWith('--redec-max-page-bytes'))) {
    r.problem('--redec-max-listing-bytes', `must be at least --redec-max-page-bytes (${maxPageBytes}), or a page of the largest size could never be read`);
  }
  return Object.freeze({ maxPageBytes, maxRecords, maxListingBytes });
}

export function readRedecReconcile(r: Reader): RedecReconcileConfig | null {
  const intervalMs = r.int('redec-reconcile-interval-ms', DEFAULT_REDEC_RECONCILE_INTERVAL_MS, 0, 7 * 86_400_000);
  const graceMs = r.int('redec-reconcile-grace-ms', DEFAULT_REDEC_RECONCILE_GRACE_MS, 0, 30 * 86_400_000);
  const repeatMs = r.int('redec-reconcile-repeat-ms', DEFAULT_REDEC_RECONCILE_REPEAT_MS, 1, 30 * 86_400_000);
  const pageLimit = r.int('redec-reconcile-page-limit', DEFAULT_REDEC_RECONCILE_PAGE_LIMIT, 1, 10_000);
  const fields = readRedecFields(r);
  const bounds = readRedecBounds(r);
  const raw = r.raw('redec-reconcile-interval-ms');
  if (raw && intervalMs > 0 && intervalMs < 100) r.problem(raw.label, `must be 0 (off) or at least 100, got ${intervalMs}`);
  return intervalMs === 0 ? null : Object.freeze({ intervalMs, graceMs, repeatMs, pageLimit, fields, bounds });
}

/**
 * Resolves `--redec-items-field` and `--redec-cursor-param` (for `redec pending`).
 * @throws ConfigError naming the flag.
 */
export function resolveRedecListingFields(flags: RawFlags, env: RawEnv = process.env): RedecListingFields {
  const r = new Reader(flags, env);
  const fields = readRedecFields(r);
  if (r.problems.length > 0) throw new ConfigError(r.problems);
  return fields;
}
/**
 * Resolves `--redec-max-page-bytes`, `--redec-max-records` and `--redec-max-listing-bytes` (for `redec pending`).
 * @throws ConfigError naming the flag.
 */
export function resolveRedecListingBounds(flags: RawFlags, env: RawEnv = process.env): RedecListingBounds {
  const r = new Reader(flags, env);
  const bounds = readRedecBounds(r);
  if (r.problems.length > 0) throw new ConfigError(r.problems);
  return bounds;
}
