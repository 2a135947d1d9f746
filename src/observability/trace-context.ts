/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/) as the sidecar reads it from an app, a
 * proxy or the service: what passes on, and what is dropped. Nothing here imports OpenTelemetry, so
 * the routes can use it with spans off at no cost beyond the check itself.
 */

/** The four fields of a `traceparent`: version, trace id, parent id, flags. */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/;
/** A version-00 `traceparent`'s exact length. */
const TRACEPARENT_CHARS = 55;
const ALL_ZERO = /^0+$/;
/** The specification's bound on a propagated `tracestate` (it may drop the whole header beyond it). */
export const MAX_TRACESTATE_CHARS = 512;

/**
 * The `traceparent` to pass on, or null (dropped, never forwarded): always a version-00 header of
 * exactly 55 characters. A version-00 header as it came when it is exactly that (four fields, lower
 * case hex, neither id all zeros); a higher version read by its first four fields, as the
 * specification says, and passed on as version 00 (what follows them, however long, is dropped);
 * version `ff` is invalid.
 *
 * @example validTraceparent('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01') // the same string
 */
export function validTraceparent(value: string | undefined): string | null {
  if (value === undefined || value.length < TRACEPARENT_CHARS) return null;
  const m = TRACEPARENT.exec(value.slice(0, TRACEPARENT_CHARS));
  if (!m || m[1] === 'ff' || ALL_ZERO.test(m[2]!) || ALL_ZERO.test(m[3]!)) return null;
  if (m[1] === '00') return value.length === TRACEPARENT_CHARS ? value : null;
  // A later version may append fields, each after a '-'.
  if (value.length > TRACEPARENT_CHARS && value.charCodeAt(TRACEPARENT_CHARS) !== 0x2d) return null;
  return `00${value.slice(2, TRACEPARENT_CHARS)}`;
}

/** A `tracestate` list member: a key (lower case, optional tenant `@` system) and a printable value. */
const TRACESTATE_MEMBER = /^(?:[a-z][a-z0-9_\-*/]{0,255}|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13})=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/;
/** The specification's bound on list members of a `tracestate`. */
const MAX_TRACESTATE_MEMBERS = 32;

/**
 * A `tracestate`, passed on only beside a valid `traceparent` and only within the W3C limits: at
 * most 512 characters and 32 list members, each a well-formed `key=value`; else none is sent.
 */
export function validTracestate(value: string | undefined): string | null {
  if (value === undefined || value.trim() === '' || value.length > MAX_TRACESTATE_CHARS) return null;
  const members = value.split(',').map((m) => m.trim()).filter((m) => m !== '');
  if (members.length === 0 || members.length > MAX_TRACESTATE_MEMBERS) return null;
  return members.every((m) => TRACESTATE_MEMBER.test(m)) ? value : null;
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
