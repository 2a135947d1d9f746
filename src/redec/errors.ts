import { SidecarError } from '../lib/errors.js';

export type RedecErrorCode =
  | 'ERR_REDEC_NETWORK'
  | 'ERR_REDEC_TIMEOUT'
  | 'ERR_REDEC_HTTP_STATUS'
  | 'ERR_REDEC_MALFORMED_PAGE'
  | 'ERR_REDEC_CURSOR_LOOP'
  | 'ERR_REDEC_TOO_LARGE';

/** Which bound a `ERR_REDEC_TOO_LARGE` listing passed. */
export type RedecBound = 'page_bytes' | 'records' | 'listing_bytes';

/**
 * Listing the notification requirements failed; `status` is set for `ERR_REDEC_HTTP_STATUS`, `bound`
 * for `ERR_REDEC_TOO_LARGE`.
 */
export class RedecError extends SidecarError<RedecErrorCode> {
  readonly status?: number;
  readonly bound?: RedecBound;

  constructor(code: RedecErrorCode, message: string, options?: { cause?: unknown; status?: number; bound?: RedecBound }) {
    super(code, message, options);
    if (options?.status !== undefined) this.status = options.status;
    if (options?.bound !== undefined) this.bound = options.bound;
  }
}
