/**
 * The first member name that appears twice in one JSON object, at any depth, or `undefined`.
 *
 * `JSON.parse` keeps the last of duplicated members, so `{"decision":"DENY","decision":"ALLOW"}`
 * reads as ALLOW; a body with two answers is ambiguous and must be no decision. This scanner runs
 * after `JSON.parse` has accepted the text, so it can assume valid JSON and only tracks strings,
 * braces, brackets and commas. Names are compared as `JSON.parse` reads them: a name holding an
 * escape (`"decisio\u006e"`) is decoded first.
 *
 * Measured on the hot miss path (test/bench/parse-response.ts): cheaper than the strict parsers of
 * lossless-json, json-bigint or jsonc-parser, which were slower or accepted duplicates.
 *
 * @param text a string `JSON.parse` accepted
 * @example findDuplicateMember('{"a":1,"b":{"c":1,"c":2}}') // 'c'
 */
export function findDuplicateMember(text: string): string | undefined {
  // One frame per open container: the names seen so far for an object, null for an array.
  const frames: (string[] | Set<string> | null)[] = [];
  let top: string[] | Set<string> | null = null;
  let nameNext = false;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      let j = i + 1;
      let escaped = false;
      for (;;) {
        const d = text.charCodeAt(j);
        if (d === 0x22) break;
        if (d === 0x5c /* \ */) {
          escaped = true;
          j += 2;
        } else j++;
      }
      if (nameNext && top !== null) {
        const name = escaped ? (JSON.parse(text.slice(i, j + 1)) as string) : text.slice(i + 1, j);
        if (Array.isArray(top)) {
          if (top.includes(name)) return name;
          top.push(name);
          // Linear search is cheapest for the few members of a decision; big objects get a set.
          if (top.length > 16) frames[frames.length - 1] = top = new Set(top);
        } else {
          if (top.has(name)) return name;
          top.add(name);
        }
        nameNext = false;
      }
      i = j;
    } else if (c === 0x7b /* { */) {
      top = [];
      frames.push(top);
      nameNext = true;
    } else if (c === 0x5b /* [ */) {
      top = null;
      frames.push(top);
      nameNext = false;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      frames.pop();
      top = frames.length === 0 ? null : (frames[frames.length - 1] ?? null);
      nameNext = false;
    } else if (c === 0x2c /* , */) {
      nameNext = top !== null;
    }
  }
  return undefined;
}
