import type { OptionSpec } from './option-spec.js';

/** How often the pending REDEC obligations are listed (ms); 0 turns the reconciler off. */
export const DEFAULT_REDEC_RECONCILE_INTERVAL_MS = 300_000;
/** An obligation still pending this long after it was first seen is handed to the app (ms). */
export const DEFAULT_REDEC_RECONCILE_GRACE_MS = 7_200_000;
/** An obligation handed to the app and still pending is handed again after this long (ms). */
export const DEFAULT_REDEC_RECONCILE_REPEAT_MS = 86_400_000;
/** Page size the reconciler asks of the service (`limit`). */
export const DEFAULT_REDEC_RECONCILE_PAGE_LIMIT = 100;
/** Largest page of the REDEC listing read (bytes); a bigger one fails the run `too_large` (issue 20). */
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
    defaultText: String(DEFAULT_REDEC_RECONCILE_INTERVAL_MS),
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
