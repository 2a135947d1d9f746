/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/) as the sidecar reads it from an app, a
 * proxy or the service: what passes on, and what is dropped. Nothing here imports OpenTelemetry, so
 * the routes can use it with spans off at no cost beyond the check itself.
 */

/** A `traceparent`: version, trace id, parent id, flags; a later version may add `-` and more after the flags. */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}(-[\x21-\x7e]*)?$/;
const ALL_ZERO = /^0+$/;
/** The specification's bound on a propagated `tracestate` (it may drop the whole header beyond it). */
export const MAX_TRACESTATE_CHARS = 512;

/**
 * The header as it came when it is a valid `traceparent`, else null (dropped, never forwarded):
 * version `ff` is invalid, version `00` has exactly four fields, neither id is all zeros, hex is
 * lower case. A higher version is accepted by its first four fields, as the specification says.
 *
 * @example validTraceparent('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01') // the same string
 */
export function validTraceparent(value: string | undefined): string | null {
  if (value === undefined) return null;
  const m = TRACEPARENT.exec(value);
  if (!m || m[1] === 'ff' || (m[1] === '00' && m[4] !== undefined)) return null;
  if (ALL_ZERO.test(m[2]!) || ALL_ZERO.test(m[3]!)) return null;
  return value;
}

/** A `tracestate`, passed on only beside a valid `traceparent`: printable ASCII, not blank, at most 512 characters. */
export function validTracestate(value: string | undefined): string | null {
  if (value === undefined || value.trim() === '' || value.length > MAX_TRACESTATE_CHARS) return null;
  return /^[\x20-\x7e]*$/.test(value) ? value : null;
}

/** The trace context headers of one request, before validation. */
export interface RawTraceContext {
  /** `''` when the header was given more than once: no trace context (the W3C test suite restarts the trace). */
  readonly traceparent: string | undefined;
  /** Several `tracestate` fields are one list, joined with commas (RFC 9110 field lines, as the specification says). */
  readonly tracestate: string | undefined;
}

/**
 * Reads `traceparent` and `tracestate` from node's `rawHeaders` (name, value, …) in one pass.
 * A repeated `traceparent` is ambiguous and becomes `''`, which no validation accepts.
 */
export function rawTraceContext(raw: readonly string[]): RawTraceContext {
  let traceparent: string | undefined;
  let tracestate: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length === 11 && name.toLowerCase() === 'traceparent') traceparent = traceparent === undefined ? raw[i + 1] : '';
    else if (name.length === 10 && name.toLowerCase() === 'tracestate') tracestate = tracestate === undefined ? raw[i + 1] : `${tracestate},${raw[i + 1]}`;
  }
  return { traceparent, tracestate };
}

/**
 * Spans off: the W3C headers to send on as they came (name, value, …), or none when the
 * `traceparent` is absent or malformed (a `tracestate` alone is never sent).
 */
export function passedOn(traceparent: string | undefined, tracestate: string | undefined): string[] {
  const parent = validTraceparent(traceparent);
  if (parent === null) return [];
  const state = validTracestate(tracestate);
  return state === null ? ['traceparent', parent] : ['traceparent', parent, 'tracestate', state];
}
