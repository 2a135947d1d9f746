/**
 * The `grpc-timeout` request header (gRPC over HTTP/2: 1 to 8 ASCII digits, then a unit: `H`
 * hours, `M` minutes, `S` seconds, `m` milliseconds, `u` microseconds, `n` nanoseconds), as ms.
 */

const UNIT_MS: Readonly<Record<string, number>> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 1e-3, n: 1e-6 };

/** The header's timeout in ms, or undefined when it is not well-formed (then the sidecar's own deadline applies). */
export function parseGrpcTimeout(value: string): number | undefined {
  const n = value.length - 1;
  if (n < 1 || n > 8) return undefined;
  const unit = UNIT_MS[value[n]!];
  if (unit === undefined) return undefined;
  let digits = 0;
  for (let i = 0; i < n; i++) {
    const c = value.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return undefined;
    digits = digits * 10 + c;
  }
  return digits * unit;
}

/**
 * Room left between an answer written and the caller's own timer (ms): the smaller of 50 ms and a
 * quarter of its timeout. The answer has to be written (node hands it to the connection on the
 * event loop's next turn), cross the network to Envoy and be read by it, and the timer that fires
 * it can itself run late on a busy event loop; and Envoy's timer started when it sent the call,
 * before its stream reached the sidecar (which counts from there). 50 ms covers that on a loaded
 * node; a quarter keeps a short timeout useful (Envoy's default 200 ms leaves 150 ms to decide,
 * 20 ms leaves 15 ms).
 */
export function answerMarginMs(timeoutMs: number): number {
  return Math.min(50, timeoutMs / 4);
}

/**
 * When a call with this `grpc-timeout` header, its stream started at `startedAt` (monotonic ms),
 * has to be answered for its answer to reach the caller in time: its timeout less
 * {@link answerMarginMs}, from the stream's start. Infinity when the header is not well-formed.
 */
export function answerByFor(value: string, startedAt: number): number {
  const t = parseGrpcTimeout(value);
  return t === undefined ? Infinity : startedAt + t - answerMarginMs(t);
}
