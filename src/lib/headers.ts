/**
 * The one rule for a header the sidecar decides on (a signature, a timestamp, a user reference, a
 * configKey): given once, it is its value; absent or blank, it is absent; given more than once it
 * is ambiguous (`null`), and an ambiguous header is refused, never resolved by taking the first.
 */

/** From node's `headersDistinct` (every header as an array) or a plain headers object. */
export function singleValue(value: string | readonly string[] | undefined): string | null | undefined {
  if (Array.isArray(value)) {
    if (value.length > 1) return null;
    value = value[0] as string | undefined;
  }
  return typeof value !== 'string' || value.trim() === '' ? undefined : value;
}

/** From node's `rawHeaders` (name, value, name, value, …); `name` in lower case. */
export function singleRaw(raw: readonly string[], name: string): string | null | undefined {
  let found: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const n = raw[i]!;
    if (n.length !== name.length || n.toLowerCase() !== name) continue;
    if (found !== undefined) return null;
    found = raw[i + 1]!;
  }
  // Blank is absent, as in singleValue: one rule for both forms.
  return found === undefined || found.trim() === '' ? undefined : found;
}
