import { ConfigError } from './errors.js';
import type { OptionSpec } from './option-spec.js';
import { Reader, type RawEnv, type RawFlags } from './reader.js';

// REDEC: the listing's field names and bounds (`serve` and `redec pending`), and the reconciler.

/**
 * How often the pending REDEC obligations are listed (ms) when the reconciler is on by default, that
 * is with `--app-webhook-url` (where obligations are handed); without it the default is off (0).
 */
export const DEFAULT_REDEC_RECONCILE_INTERVAL_MS = 300_000;
/** An obligation still pending this long after it was first seen is handed to the app (ms). */
export const DEFAULT_REDEC_RECONCILE_GRACE_MS = 7_200_000;
/** An obligation handed to the app and still pending is handed again after this long (ms). */
export const DEFAULT_REDEC_RECONCILE_REPEAT_MS = 86_400_000;
/** Page size the reconciler asks of the service (`limit`). */
export const DEFAULT_REDEC_RECONCILE_PAGE_LIMIT = 100;
/** Largest page of the REDEC listing read (bytes); a bigger one fails the run `too_large`. */
export const DEFAULT_REDEC_MAX_PAGE_BYTES = 8_388_608;
/** Most records one run of the REDEC listing holds, all pages together; more fail the run `too_large`. */
export const DEFAULT_REDEC_MAX_RECORDS = 100_000;
/** Most bytes one listing of REDEC obligations reads, all pages together; more fail the run `too_large`. */
export const DEFAULT_REDEC_MAX_LISTING_BYTES = 67_108_864;

/** Where the listing's records and cursor are (the document does not show it), and its bounds: `serve` and `redec pending`. */
export const REDEC_LISTING_OPTIONS: readonly OptionSpec[] = [
  {
    name: 'redec-items-field',
    arg: '<name>',
    description: 'page member holding the REDEC listing\'s records',
    defaultText: '"items", else the only array of objects',
  },
  { name: 'redec-cursor-param', arg: '<name>', description: 'query parameter the REDEC listing\'s cursor is sent as', defaultText: 'cursor' },
  {
    name: 'redec-max-page-bytes',
    arg: '<bytes>',
    description: 'largest page of the REDEC listing read; a bigger one is cut off and the run fails too_large',
    defaultText: String(DEFAULT_REDEC_MAX_PAGE_BYTES),
  },
  {
    name: 'redec-max-records',
    arg: '<n>',
    description: 'most records of the REDEC listing in one run, all pages together; more fail the run too_large',
    defaultText: String(DEFAULT_REDEC_MAX_RECORDS),
  },
  {
    name: 'redec-max-listing-bytes',
    arg: '<bytes>',
    description: 'most bytes of one REDEC listing, all pages together; more fail the run too_large',
    defaultText: String(DEFAULT_REDEC_MAX_LISTING_BYTES),
  },
];

export const REDEC_RECONCILE_OPTIONS: readonly OptionSpec[] = [
  {
    name: 'redec-reconcile-interval-ms',
    arg: '<ms>',
    description: 'how often pending REDEC obligations are listed; 0 turns the reconciler off',
    defaultText: `${DEFAULT_REDEC_RECONCILE_INTERVAL_MS} with --app-webhook-url, else 0 (off)`,
  },
  {
    name: 'redec-reconcile-grace-ms',
    arg: '<ms>',
    description: 'an obligation still pending this long after it was first seen is handed to the app',
    defaultText: String(DEFAULT_REDEC_RECONCILE_GRACE_MS),
  },
  {
    name: 'redec-reconcile-repeat-ms',
    arg: '<ms>',
    description: 'an obligation handed and still pending is handed again after this long',
    defaultText: String(DEFAULT_REDEC_RECONCILE_REPEAT_MS),
  },
  {
    name: 'redec-reconcile-page-limit',
    arg: '<n>',
    description: 'page size the reconciler asks of the service',
    defaultText: String(DEFAULT_REDEC_RECONCILE_PAGE_LIMIT),
  },
  ...REDEC_LISTING_OPTIONS,
];

/** Where the listing's records are and how its cursor goes out (`--redec-items-field`, `--redec-cursor-param`). */
export interface RedecListingFields {
  /** null: `items`, else the page's only array of objects. */
  readonly itemsField: string | null;
  readonly cursorParam: string;
}

/**
 * How much of the listing one run reads (`--redec-max-page-bytes`, `--redec-max-records`,
 * `--redec-max-listing-bytes`); beyond any, the run fails `too_large` and nothing from it is used.
 */
export interface RedecListingBounds {
  /** Largest page read (bytes); the body is cut off past it. */
  readonly maxPageBytes: number;
  /** Most records in one run, all pages together. */
  readonly maxRecords: number;
  /** Most bytes read by one listing, all pages together. */
  readonly maxListingBytes: number;
}

/** The reconciler (`--redec-reconcile-*`); null when the interval is 0. */
export interface RedecReconcileConfig {
  readonly intervalMs: number;
  readonly graceMs: number;
  readonly repeatMs: number;
  readonly pageLimit: number;
  readonly fields: RedecListingFields;
  readonly bounds: RedecListingBounds;
}

const FIELD_NAME = /^[A-Za-z0-9_.~-]{1,64}$/;

function readRedecFields(r: Reader): RedecListingFields {
  const items = r.raw('redec-items-field');
  const cursor = r.raw('redec-cursor-param');
  if (items && !FIELD_NAME.test(items.value)) r.problem(items.label, `must be 1-64 letters, digits, "_", "-", "." or "~", got "${items.value}"`);
  if (cursor && !FIELD_NAME.test(cursor.value)) r.problem(cursor.label, `must be 1-64 letters, digits, "_", "-", "." or "~", got "${cursor.value}"`);
  return Object.freeze({ itemsField: items?.value ?? null, cursorParam: cursor?.value ?? 'cursor' });
}

/** `--redec-max-page-bytes`, `--redec-max-records`, `--redec-max-listing-bytes`. */
function readRedecBounds(r: Reader): RedecListingBounds {
  const maxPageBytes = r.int('redec-max-page-bytes', DEFAULT_REDEC_MAX_PAGE_BYTES, 1024, 1024 * 1024 * 1024);
  const maxRecords = r.int('redec-max-records', DEFAULT_REDEC_MAX_RECORDS, 1, 100_000_000);
  const maxListingBytes = r.int('redec-max-listing-bytes', DEFAULT_REDEC_MAX_LISTING_BYTES, 1024, 64 * 1024 * 1024 * 1024);
  if (maxListingBytes < maxPageBytes && !r.problems.some((p) => p.startsWith('--redec-max-page-bytes'))) {
    r.problem('--redec-max-listing-bytes', `must be at least --redec-max-page-bytes (${maxPageBytes}), or a page of the largest size could never be read`);
  }
  return Object.freeze({ maxPageBytes, maxRecords, maxListingBytes });
}

/**
 * `--redec-reconcile-*` with the listing's fields and bounds; null when the reconciler is off.
 *
 * The reconciler hands obligations to the app at `--app-webhook-url`, so that is where REDEC is in
 * use: with it the reconciler is on by default ({@link DEFAULT_REDEC_RECONCILE_INTERVAL_MS}); without
 * it the default is off, and a plain `serve` neither lists the service nor warns about it. An interval
 * given explicitly is honoured either way (listing without an app measures the obligations only).
 */
export function readRedecReconcile(r: Reader, appWebhooks: boolean): RedecReconcileConfig | null {
  const intervalMs = r.int('redec-reconcile-interval-ms', appWebhooks ? DEFAULT_REDEC_RECONCILE_INTERVAL_MS : 0, 0, 7 * 86_400_000);
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
