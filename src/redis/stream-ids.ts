const STREAM_ID = /^\d{1,20}-\d{1,20}$/;

/** `<ms>-<seq>`, as Redis writes stream entry ids. */
export function isStreamId(id: string): boolean {
  return STREAM_ID.test(id);
}

/** Orders two stream ids (both checked with {@link isStreamId}): negative, zero or positive. */
export function compareStreamIds(a: string, b: string): number {
  const [am, as] = a.split('-').map(BigInt) as [bigint, bigint];
  const [bm, bs] = b.split('-').map(BigInt) as [bigint, bigint];
  if (am !== bm) return am < bm ? -1 : 1;
  return as === bs ? 0 : as < bs ? -1 : 1;
}

/**
 * The id to add after `last` (checked with {@link isStreamId}) at `nowMs`: `<now>-0` when the clock
 * is past it, else the next sequence of its millisecond (a clock behind the store's still moves on).
 */
export function nextStreamId(last: string, nowMs: number): string {
  const [ms, seq] = last.split('-').map(BigInt) as [bigint, bigint];
  const now = BigInt(Math.max(0, Math.floor(nowMs)));
  return now > ms ? `${now}-0` : `${ms}-${seq + 1n}`;
}
