import type { RedecListingFields } from '../config/index.js';
import { RedecError } from './errors.js';

/**
 * Where the records of a page are, and how the cursor goes out (the document shows neither):
 * `itemsField` null means `items` when it is an array, else the page's only array of objects.
 */
export type PageFieldRules = RedecListingFields;

/** Default query parameter of the cursor. */
export const DEFAULT_REDEC_CURSOR_PARAM = 'cursor';
/** The page member tried first for the records. */
export const DEFAULT_REDEC_ITEMS_FIELD = 'items';
export const DEFAULT_PAGE_FIELD_RULES: PageFieldRules = Object.freeze({ itemsField: null, cursorParam: DEFAULT_REDEC_CURSOR_PARAM });

/** A parsed page: its records, the cursor of the next page (null on the last) and the member the records came from. */
export interface ParsedPage {
  readonly items: readonly Readonly<Record<string, unknown>>[];
  readonly nextCursor: string | null;
  readonly itemsField: string;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isArrayOfObjects = (v: unknown): v is Record<string, unknown>[] => Array.isArray(v) && v.every(isRecord);

/**
 * Reads one page by the rules. The document names `nextCursor`; the records' member is found as
 * {@link PageFieldRules.itemsField} says. An empty array counts as an array of objects.
 *
 * @throws RedecError `ERR_REDEC_MALFORMED_PAGE` when the page is not an object, the records cannot be
 *   found without guessing (no `items` and zero or several arrays of objects), or `nextCursor` is not
 *   a non-empty string or null.
 * @example readPage({ records: [{ id: 'a' }], nextCursor: null }, DEFAULT_PAGE_FIELD_RULES).itemsField // 'records'
 */
export function readPage(body: unknown, rules: PageFieldRules): ParsedPage {
  if (!isRecord(body)) throw new RedecError('ERR_REDEC_MALFORMED_PAGE', 'the page is not a JSON object');
  const field = rules.itemsField ?? findItemsField(body);
  const items = body[field];
  if (!isArrayOfObjects(items)) {
    throw new RedecError('ERR_REDEC_MALFORMED_PAGE', `the page's "${field}" is not an array of objects`);
  }
  const next = body.nextCursor;
  if (!(next === null || (typeof next === 'string' && next !== ''))) {
    throw new RedecError('ERR_REDEC_MALFORMED_PAGE', 'the page\'s "nextCursor" is not a non-empty string or null');
  }
  return { items, nextCursor: next, itemsField: field };
}

function findItemsField(body: Record<string, unknown>): string {
  if (Array.isArray(body[DEFAULT_REDEC_ITEMS_FIELD])) return DEFAULT_REDEC_ITEMS_FIELD;
  const arrays = Object.keys(body).filter((k) => Array.isArray(body[k]) && (body[k] as unknown[]).length > 0 && isArrayOfObjects(body[k]));
  if (arrays.length === 1) return arrays[0]!;
  // An empty array says nothing about its elements: accept it only when it is the page's only array.
  const anyArrays = Object.keys(body).filter((k) => Array.isArray(body[k]));
  if (arrays.length === 0 && anyArrays.length === 1 && (body[anyArrays[0]!] as unknown[]).length === 0) return anyArrays[0]!;
  throw new RedecError(
    'ERR_REDEC_MALFORMED_PAGE',
    arrays.length === 0
      ? 'the page has no "items" and no array of objects (set --redec-items-field)'
      : `the page has no "items" and several arrays of objects (${arrays.join(', ')}); set --redec-items-field`,
  );
}
