/** Control characters (C0, DEL, C1), line and paragraph separators, and bidirectional overrides. */
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/**
 * Text that came from outside (an event id, a service's record) as one line a terminal prints as
 * written: control characters escaped (`\x1b`, `\u202e`), backslashes doubled, so a value can move
 * no cursor, colour nothing, break no row and reorder no column.
 *
 * @example printable('evt\x1b[2J') // 'evt\\x1b[2J'
 */
export function printable(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(UNPRINTABLE, (c) => {
    const code = c.charCodeAt(0);
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}
