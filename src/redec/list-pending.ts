import { request } from '../lib/undici.js';
import {
  DEFAULT_REDEC_MAX_LISTING_BYTES,
  DEFAULT_REDEC_MAX_PAGE_BYTES,
  DEFAULT_REDEC_MAX_RECORDS,
  type RedecListingBounds,
  type UpstreamConfig,
} from '../config/index.js';
import { RedecError } from './errors.js';
import { DEFAULT_PAGE_FIELD_RULES, readPage, type PageFieldRules, type ParsedPage } from './page.js';

/** Page size asked of the service. The document does not show the service's own page size. */
export const DEFAULT_REDEC_PAGE_LIMIT = 100;
/** Pages fetched at most, a guard against a service that never ends the listing. */
export const MAX_REDEC_PAGES = 10_000;
/** The flags' defaults: 8 MiB a page, 100,000 records and 64 MiB a listing. */
export const DEFAULT_LISTING_BOUNDS: RedecListingBounds = Object.freeze({
  maxPageBytes: DEFAULT_REDEC_MAX_PAGE_BYTES,
  maxRecords: DEFAULT_REDEC_MAX_RECORDS,
  maxListingBytes: DEFAULT_REDEC_MAX_LISTING_BYTES,
});

/** A notification requirement as listed; its fields are not shown by the document, so kept as given. */
export type NotificationRequirementItem = Readonly<Record<string, unknown>>;

export interface ListOptions {
  /** Default `pending`. */
  readonly status?: string;
  /** Page size, sent as `limit`. Default {@link DEFAULT_REDEC_PAGE_LIMIT}. */
  readonly limit?: number;
  /** Where the records are and how the cursor goes out; default {@link DEFAULT_PAGE_FIELD_RULES}. */
  readonly fields?: PageFieldRules;
  /** How much one listing reads and yields; default {@link DEFAULT_LISTING_BOUNDS}. */
  readonly bounds?: RedecListingBounds;
  /** Told, for every page, which member the records came from (the reconciler logs it once). */
  readonly onItemsField?: (field: string) => void;
  /** Told, for every page, before its records are yielded, how many bytes it took. */
  readonly onPageBytes?: (bytes: number) => void;
  /** Stops the listing between pages and aborts the page in flight (shutdown). */
  readonly signal?: AbortSignal;
}

/**
 * Every notification requirement of `status`, page by page: `GET
 * {base_url}/v1/redec/notification-requirements?status=…&limit=…[&cursor=…]`, following
 * `nextCursor` until it is null. Each page must answer within `upstream.timeoutMs`. The records are
 * found, and the cursor sent, as `options.fields` says (see {@link readPage}).
 *
 * Bounded (docs/redec.md, bounds): a page is read as it arrives and cut off past `bounds.maxPageBytes` (or past
 * what is left of `bounds.maxListingBytes`), never buffered beyond it; a page that would take the
 * listing past `bounds.maxRecords` records is not yielded. Either way the listing ends with
 * `ERR_REDEC_TOO_LARGE`, so a caller that uses nothing before the listing completes uses nothing of it.
 *
 * @throws RedecError on a network error, a timeout, a non-200 status, a malformed page, a cursor
 *   seen twice, or a listing past its bounds (`ERR_REDEC_TOO_LARGE`, with `bound`).
 * @example for await (const page of listNotificationRequirements(upstream)) console.log(page.length);
 */
export async function* listNotificationRequirements(
  upstream: UpstreamConfig,
  options: ListOptions = {},
): AsyncGenerator<readonly NotificationRequirementItem[]> {
  const seen = new Set<string>();
  const fields = options.fields ?? DEFAULT_PAGE_FIELD_RULES;
  const bounds = options.bounds ?? DEFAULT_LISTING_BOUNDS;
  let cursor: string | null = null;
  let records = 0;
  let bytes = 0;
  for (let page = 0; page < MAX_REDEC_PAGES; page++) {
    const url = new URL(`${upstream.baseUrl.toString().replace(/\/+$/, '')}/v1/redec/notification-requirements`);
    url.searchParams.set('status', options.status ?? 'pending');
    url.searchParams.set('limit', String(options.limit ?? DEFAULT_REDEC_PAGE_LIMIT));
    if (cursor !== null) url.searchParams.set(fields.cursorParam, cursor);
    const fetched = await fetchPage(url, upstream, options.signal, bounds, bytes);
    bytes += fetched.bytes;
    let body: ParsedPage | null = readPage(fetched.body, fields);
    fetched.body = null;
    records += body.items.length;
    if (records > bounds.maxRecords) {
      throw new RedecError('ERR_REDEC_TOO_LARGE', `the listing holds more than --redec-max-records (${bounds.maxRecords}) records`, { bound: 'records' });
    }
    const next = body.nextCursor;
    options.onItemsField?.(body.itemsField);
    options.onPageBytes?.(fetched.bytes);
    yield body.items;
    // Let the page go before the next one is read: a page may be 8 MiB, and two at once is twice that.
    body = null;
    if (next === null) return;
    if (seen.has(next)) throw new RedecError('ERR_REDEC_CURSOR_LOOP', 'the service returned a cursor it had already returned');
    seen.add(next);
    cursor = next;
  }
  throw new RedecError('ERR_REDEC_CURSOR_LOOP', `more than ${MAX_REDEC_PAGES} pages`);
}

/** The error of a body past `limit`, naming the flag that set it. */
function tooLarge(bounds: RedecListingBounds, limit: number): RedecError {
  return limit === bounds.maxPageBytes
    ? new RedecError('ERR_REDEC_TOO_LARGE', `a page of the listing is larger than --redec-max-page-bytes (${bounds.maxPageBytes} bytes)`, { bound: 'page_bytes' })
    : new RedecError('ERR_REDEC_TOO_LARGE', `the listing is larger than --redec-max-listing-bytes (${bounds.maxListingBytes} bytes)`, { bound: 'listing_bytes' });
}

/** One page, parsed, and its size; its body is read only up to the page's bound or what is left of the listing's (`readSoFar`: bytes read before it). */
async function fetchPage(
  url: URL,
  upstream: UpstreamConfig,
  stop: AbortSignal | undefined,
  bounds: RedecListingBounds,
  readSoFar: number,
): Promise<{ body: unknown; readonly bytes: number }> {
  const maxBytes = Math.min(bounds.maxPageBytes, bounds.maxListingBytes - readSoFar);
  let status: number;
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    const res = await request(url, {
      method: 'GET',
      headers: { authorization: `Bearer ${upstream.apiKey.current()}`, accept: 'application/json' },
      signal: stop ? AbortSignal.any([stop, AbortSignal.timeout(upstream.timeoutMs)]) : AbortSignal.timeout(upstream.timeoutMs),
    });
    status = res.statusCode;
    const declared = Number(res.headers['content-length']);
    // A body given up on is destroyed: undici then reports the abort on it, which is ours.
    res.body.on('error', () => undefined);
    if (status !== 200 || declared > maxBytes) {
      // Nothing of it is read: the connection goes with the body.
      res.body.destroy();
    } else {
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > maxBytes) {
          res.body.destroy();
          break;
        }
        chunks.push(chunk);
      }
    }
    if (status === 200 && (declared > maxBytes || size > maxBytes)) throw tooLarge(bounds, maxBytes);
  } catch (err) {
    if (err instanceof RedecError) throw err;
    const name = (err as Error).name;
    if (name === 'TimeoutError' || name === 'AbortError') {
      throw new RedecError('ERR_REDEC_TIMEOUT', `no answer within ${upstream.timeoutMs} ms`, { cause: err });
    }
    throw new RedecError('ERR_REDEC_NETWORK', `cannot reach the service: ${(err as { code?: string }).code ?? (err as Error).message}`, { cause: err });
  }
  if (status !== 200) throw new RedecError('ERR_REDEC_HTTP_STATUS', `the service answered HTTP ${status}`, { status });
  let whole: Buffer | null = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
  chunks.length = 0;
  const text = whole.toString('utf8');
  whole = null;
  try {
    return { body: JSON.parse(text) as unknown, bytes: size };
  } catch {
    throw new RedecError('ERR_REDEC_MALFORMED_PAGE', 'the page is not JSON');
  }
}
