/**
 * What a capability needs to know about a failed call to a shared store (Redis), without knowing
 * the store: whether the call may have taken effect. A call whose answer did not come (a deadline,
 * a connection that broke after the command was written) has an unknown outcome: the write may have
 * happened. A call refused before it was sent, or answered with an error, did not.
 *
 * "Slow is not down" (contract, Several replicas) rests on this: an unknown outcome is never taken
 * as "the key is free".
 */
export interface StoreFailure {
  readonly outcomeUnknown: boolean;
}

/** True when `err` says its call may have taken effect (see {@link StoreFailure}); unknown errors count as unknown. */
export function outcomeUnknown(err: unknown): boolean {
  const flag = (err as Partial<StoreFailure> | null)?.outcomeUnknown;
  return typeof flag === 'boolean' ? flag : true;
}
