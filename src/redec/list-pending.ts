import { request } from 'undici';
import type { UpstreamConfig } from '../config/index.js';
import { RedecError } from './errors.js';
import { DEFAULT_PAGE_FIELD_RULES, readPage, type PageFieldRules } from './page.js';

/** Page size asked of the service. The document does not show the service's own page size. */
export const DEFAULT_REDEC_PAGE_LIMIT = 100;
/** Pages fetched at most, a guard against a service that never ends the listing. */
export const MAX_REDEC_PAGES = 10_000;

/** A notification requirement as listed; its fields are not shown by the document, so kept as given. */
export type NotificationRequirementItem = Readonly<Record<string, unknown>>;

export interface ListOptions {
  /** Default `pending`. */
  readonly status?: string;
  /** Page size, sent as `limit`. Default {@link DEFAULT_REDEC_PAGE_LIMIT}. */
  readonly limit?: number;
  /** Where the records are and how the cursor goes out; default {@link DEFAULT_PAGE_FIELD_RULES}. */
  readonly fields?: PageFieldRules;
  /** Told, for every page, which member the records came from (the reconciler logs it once). */
  readonly onItemsField?: (field: string) => void;
  /** Stops the listing between pages and aborts the page in flight (shutdown). */
  readonly signal?: AbortSignal;
}

/**
 * Every notification requirement of `status`, page by page: `GET
 * {base_url}/v1/redec/notification-requirements?status=…&limit=…[&cursor=…]`, following
 * `nextCursor` until it is null. Each page must answer within `upstream.timeoutMs`. The records are
 * found, and the cursor sent, as `options.fields` says (see {@link readPage}).
 *
 * @throws RedecError on a network error, a timeout, a non-200 status, a malformed page, or a cursor
 *   seen twice.
 * @example for await (const page of listNotificationRequirements(upstream)) console.log(page.length);
 */
export async function* listNotificationRequirements(
  upstream: UpstreamConfig,
  options: ListOptions = {},
): AsyncGenerator<readonly NotificationRequirementItem[]> {
  const seen = new Set<string>();
  const fields = options.fields ?? DEFAULT_PAGE_FIELD_RULES;
  let cursor: string | null = null;
  for (let page = 0; page < MAX_REDEC_PAGES; page++) {
    const url = new URL(`${upstream.baseUrl.toString().replace(/\/+$/, '')}/v1/redec/notification-requirements`);
    url.searchParams.set('status', options.status ?? 'pending');
    url.searchParams.set('limit', String(options.limit ?? DEFAULT_REDEC_PAGE_LIMIT));
    if (cursor !== null) url.searchParams.set(fields.cursorParam, cursor);
    const body = readPage(await fetchPage(url, upstream, options.signal), fields);
    options.onItemsField?.(body.itemsField);
    yield body.items;
    if (body.nextCursor === null) return;
    if (seen.has(body.nextCursor)) throw new RedecError('ERR_REDEC_CURSOR_LOOP', 'the service returned a cursor it had already returned');
    seen.add(body.nextCursor);
    cursor = body.nextCursor;
  }
  throw new RedecError('ERR_REDEC_CURSOR_LOOP', `more than ${MAX_REDEC_PAGES} pages`);
}

async function fetchPage(url: URL, upstream: UpstreamConfig, stop: AbortSignal | undefined): Promise<unknown> {
  let status: number;
  let text: string;
  try {
    const res = await request(url, {
      method: 'GET',
      headers: { authorization: `Bearer ${upstream.apiKey.current()}`, accept: 'application/json' },
      signal: stop ? AbortSignal.any([stop, AbortSignal.timeout(upstream.timeoutMs)]) : AbortSignal.timeout(upstream.timeoutMs),
    });
    status = res.statusCode;
    text = await res.body.text();
  } catch (err) {
    const name = (err as Error).name;
    if (name === 'TimeoutError' || name === 'AbortError') {
      throw new RedecError('ERR_REDEC_TIMEOUT', `no answer within ${upstream.timeoutMs} ms`, { cause: err });
    }
    throw new RedecError('ERR_REDEC_NETWORK', `cannot reach the service: ${(err as { code?: string }).code ?? (err as Error).message}`, { cause: err });
  }
  if (status !== 200) throw new RedecError('ERR_REDEC_HTTP_STATUS', `the service answered HTTP ${status}`, { status });
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new RedecError('ERR_REDEC_MALFORMED_PAGE', 'the page is not JSON');
  }
}
