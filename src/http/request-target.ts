/** The strict check route: the only target the service's decision is asked on. */
export const CHECK_PATH = '/v1/authorization/check';
/** The only prefix the API key is ever sent to. */
const PASSTHROUGH_PREFIX = '/v1/';

/**
 * Why a raw target is refused (docs/decision-api.md: the key is for /v1/ alone). Stable codes, sent as `problem` in the 400 body:
 * - `fragment`: a `#` in the target;
 * - `invalid_character`: a character that has no place in a path (`"`, `<`, `>`, `{`, `}`, `` ` ``);
 * - `backslash`: a literal `\`, which some servers read as `/`;
 * - `path_parameter`: `;` or `%3b`, which some servers cut the segment at;
 * - `invalid_escape`: a `%` not followed by two hex digits;
 * - `control_character`: a control character or a space, literal or encoded (`%00`-`%20`, `%7f`, C1, Unicode spaces);
 * - `encoded_slash`: `%2f` or `%5c`, which some servers decode before splitting the path;
 * - `encoded_delimiter`: `%3f` or `%23`, which a server that decodes before parsing reads as the
 *   start of a query or fragment (`/v1/..%3f` would be `/v1/..`);
 * - `encoded_unreserved`: an escape of a letter, digit, `-`, `.`, `_` or `~` (`%2e`, `%63`), which a
 *   normalising server decodes (RFC 3986 §6.2.2.2) and a literal one does not;
 * - `double_encoding`: `%25` followed by two hex digits, which a server that decodes twice reads as an escape;
 * - `invalid_utf8`: escapes that are not UTF-8;
 * - `compatibility_character`: a character that Unicode normalisation (NFKC) or case mapping turns
 *   into ASCII (`／` U+FF0F, `ｃ`, `ı`, the Kelvin sign), or that is invisible (soft hyphen, zero-width);
 * - `empty_segment`: `//` (some servers fold it, some do not);
 * - `dot_segment`: a segment of dots only (`.`, `..`, `...`), resolved by some servers;
 * - `not_v1`: a spelling of `/v1/` other than `/v1/` itself (`/V1/`);
 * - `check_path_spelling`: a path that reads as the check path followed by something (`check.`,
 *   `check.json`, `checks`, `check/x`), which a service with suffix matching could decide on.
 */
export type TargetProblem =
  | 'fragment'
  | 'invalid_character'
  | 'backslash'
  | 'path_parameter'
  | 'invalid_escape'
  | 'control_character'
  | 'encoded_slash'
  | 'encoded_delimiter'
  | 'encoded_unreserved'
  | 'double_encoding'
  | 'invalid_utf8'
  | 'compatibility_character'
  | 'empty_segment'
  | 'dot_segment'
  | 'not_v1'
  | 'check_path_spelling';

/** What the decision listener does with a target that is not the strict check route. */
export type TargetVerdict =
  | { readonly kind: 'passthrough' }
  | { readonly kind: 'not_found' }
  | { readonly kind: 'refused'; readonly problem: TargetProblem; readonly detail: string };

/** Literal characters a path may hold as they are: RFC 3986 pchar and `/` without `;`, and `|^[]` that WHATWG clients leave raw. */
const PATH_CHAR = /^[A-Za-z0-9\-._~!$&'()*+,=:@/|^[\]]$/;
const HEX = /^[0-9A-Fa-f]{2}$/;
const UNRESERVED_BYTE = /^[A-Za-z0-9\-._~]$/;
/** Unicode that reads as a control character or a space. */
const UNICODE_SPACE_OR_CONTROL = /[\p{Cc}\p{White_Space}]/u;
/** Unicode that some software drops or ignores. */
const INVISIBLE = /[\p{Cf}\p{Default_Ignorable_Code_Point}]/u;
const ASCII = /[\x00-\x7f]/;
const utf8 = new TextDecoder('utf-8', { fatal: true });

const refused = (problem: TargetProblem, detail: string): TargetVerdict => ({ kind: 'refused', problem, detail });
const show = (c: string): string => JSON.stringify(c);

/**
 * Judges a raw origin-form target (`req.url`, starting with `/`) that is not the strict check route.
 * The path (up to `?`) must already be its own normal form, so that every server behind us reads it
 * as we do: then it passes through exactly as written when it starts with `/v1/`, or is not found.
 * The query is the application's and is not judged (it cannot move the path).
 *
 * @example judgeTarget('/v1/customers/c-1/consent-compliance?template=t') // { kind: 'passthrough' }
 * @example judgeTarget('/admin/../v1/foo') // { kind: 'refused', problem: 'dot_segment', … }
 */
export function judgeTarget(target: string): TargetVerdict {
  if (target.includes('#')) return refused('fragment', 'the target holds a "#"');
  const q = target.indexOf('?');
  const path = q === -1 ? target : target.slice(0, q);

  // Byte for byte: literal characters and escapes, collecting the decoded bytes.
  const bytes: number[] = [];
  for (let i = 0; i < path.length; i++) {
    const c = path[i]!;
    if (c === '%') {
      const hex = path.slice(i + 1, i + 3);
      if (!HEX.test(hex)) return refused('invalid_escape', `"%" not followed by two hex digits at offset ${i}`);
      const b = parseInt(hex, 16);
      const escape = `%${hex}`;
      if (b < 0x21 || b === 0x7f) return refused('control_character', `the path holds an encoded control character or space (${escape})`);
      if (b === 0x2f || b === 0x5c) return refused('encoded_slash', `the path holds an encoded slash or backslash (${escape})`);
      if (b === 0x3b) return refused('path_parameter', `the path holds an encoded ";" (${escape})`);
      if (b === 0x3f || b === 0x23) return refused('encoded_delimiter', `the path holds an encoded "?" or "#" (${escape})`);
      if (b === 0x25 && HEX.test(path.slice(i + 3, i + 5))) return refused('double_encoding', `the path holds a double-encoded escape (${path.slice(i, i + 5)})`);
      if (b < 0x80 && UNRESERVED_BYTE.test(String.fromCharCode(b))) {
        return refused('encoded_unreserved', `the path holds an escape of an unreserved character (${escape} for ${show(String.fromCharCode(b))})`);
      }
      bytes.push(b);
      i += 2;
      continue;
    }
    const code = c.charCodeAt(0);
    if (code < 0x21 || code === 0x7f) return refused('control_character', 'the path holds a literal control character or space');
    if (c === '\\') return refused('backslash', 'the path holds a backslash');
    if (c === ';') return refused('path_parameter', 'the path holds a ";" (a path parameter)');
    if (!PATH_CHAR.test(c)) return refused('invalid_character', `the path holds ${show(c)}, which must be percent-encoded`);
    bytes.push(code);
  }

  let decoded: string;
  try {
    decoded = utf8.decode(Uint8Array.from(bytes));
  } catch {
    return refused('invalid_utf8', 'the path holds escapes that are not UTF-8');
  }
  for (const ch of decoded) {
    if (ch.charCodeAt(0) < 0x80) continue;
    if (UNICODE_SPACE_OR_CONTROL.test(ch)) return refused('control_character', `the path holds a Unicode control character or space (U+${hexOf(ch)})`);
    if (INVISIBLE.test(ch)) return refused('compatibility_character', `the path holds an invisible character (U+${hexOf(ch)})`);
    if (ASCII.test(ch.normalize('NFKC')) || ASCII.test(ch.toLowerCase()) || ASCII.test(ch.toUpperCase())) {
      return refused('compatibility_character', `the path holds U+${hexOf(ch)}, which Unicode normalisation or case mapping turns into ASCII`);
    }
  }

  const segments = path.split('/');
  for (let i = 1; i < segments.length; i++) {
    const s = segments[i]!;
    // A trailing slash is a normal form of its own; an empty segment inside is not.
    if (s === '' && i < segments.length - 1) return refused('empty_segment', 'the path holds an empty segment ("//")');
    if (/^\.+$/.test(s)) return refused('dot_segment', `the path holds a dot segment (${show(s)})`);
  }

  if (!path.startsWith(PASSTHROUGH_PREFIX)) {
    return decoded.toLowerCase().startsWith(PASSTHROUGH_PREFIX) ? refused('not_v1', 'the path must begin with "/v1/" exactly') : { kind: 'not_found' };
  }
  if (decoded.toLowerCase().startsWith(CHECK_PATH)) {
    return refused('check_path_spelling', `the path spells ${CHECK_PATH} with something after it: POST ${CHECK_PATH} exactly`);
  }
  return { kind: 'passthrough' };
}

const hexOf = (ch: string): string => ch.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0');

/**
 * The path as a server behind us could read it: query dropped, escapes decoded, dot segments
 * resolved, slashes folded, lower case (`null` when an escape is invalid). Used to route every
 * spelling of the check path to the strict check route, which asks the service on
 * {@link CHECK_PATH} itself; never to decide what passes through (see {@link judgeTarget}).
 */
export function canonicalPath(url: string): string | null {
  const raw = url.split('?')[0] ?? '';
  try {
    // Leading slashes are folded first: `//v1/...` would otherwise parse as a host named v1.
    const decoded = decodeURIComponent(raw).replace(/\\/g, '/').replace(/^\/+/, '/');
    // The URL parser drops tabs and newlines anywhere and trims spaces and controls at the ends:
    // a path that holds one is not read as any route, it is refused (judgeTarget).
    if (/[\x00-\x20\x7f]/.test(decoded)) return null;
    const path = new URL(decoded, 'http://sidecar.invalid').pathname;
    return path.replace(/\/{2,}/g, '/').replace(/(.)\/+$/, '$1').toLowerCase();
  } catch {
    return null;
  }
}
