import { SidecarError } from '../lib/errors.js';

export type RedecErrorCode =
  | 'ERR_REDEC_NETWORK'
  | 'ERR_REDEC_TIMEOUT'
  | 'ERR_REDEC_HTTP_STATUS'
  | 'ERR_REDEC_MALFORMED_PAGE'
  | 'ERR_REDEC_CURSOR_LOOP';

/** Listing the notification requirements failed; `status` is set for `ERR_REDEC_HTTP_STATUS`. */
export class RedecError extends SidecarError<RedecErrorCode> {
  readonly status?: number;

  constructor(code: RedecErrorCode, message: string, options?: { cause?: unknown; status?: number }) {
    super(code, message, options);
    if (options?.status !== undefined) this.status = options.status;
  }
}
