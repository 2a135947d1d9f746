/**
 * Base class of every error the sidecar raises on purpose. Each capability defines a union of
 * stable codes and a subclass, so a `switch (err.code)` narrows and tests assert the code, never
 * the message.
 *
 * @example
 * type CacheErrorCode = 'ERR_CACHE_FULL';
 * class CacheError extends SidecarError<CacheErrorCode> {}
 */
export class SidecarError<C extends string = string> extends Error {
  readonly code: C;

  constructor(code: C, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/** True when `err` is a {@link SidecarError} carrying `code`. */
export function hasCode<C extends string>(err: unknown, code: C): err is SidecarError<C> {
  return err instanceof SidecarError && err.code === code;
}
