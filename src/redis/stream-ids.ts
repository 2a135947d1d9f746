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
