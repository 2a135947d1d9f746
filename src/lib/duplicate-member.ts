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
  return locateDuplicateMember(text)?.name;
}

/** A member name repeated in one object, and where that object is. */
export interface DuplicateMember {
  readonly name: string;
  /** The member names and array indices leading from the top to the object holding it (`[]`: the top). */
  readonly path: readonly (string | number)[];
}

/** One open container: the names seen so far (null for an array), and where in it the scan is. */
interface Frame {
  names: string[] | Set<string> | null;
  /** In an object, the name read last; in an array, the element's index. */
  at: string | number;
}

/**
 * As {@link findDuplicateMember}, with where the repeated name is: a request of several items
 * names the item that is ambiguous. Same assumptions (a text `JSON.parse` accepted).
 *
 * @example locateDuplicateMember('{"checks":[{"a":1},{"b":1,"b":2}]}') // { name: 'b', path: ['checks', 1] }
 */
export function locateDuplicateMember(text: string): DuplicateMember | undefined {
  const frames: Frame[] = [];
  let top: Frame | null = null;
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
      if (nameNext && top !== null && top.names !== null) {
        const name = escaped ? (JSON.parse(text.slice(i, j + 1)) as string) : text.slice(i + 1, j);
        const names = top.names;
        if (Array.isArray(names)) {
          if (names.includes(name)) return found(name, frames);
          names.push(name);
          // Linear search is cheapest for the few members of a decision; big objects get a set.
          if (names.length > 16) top.names = new Set(names);
        } else {
          if (names.has(name)) return found(name, frames);
          names.add(name);
        }
        top.at = name;
        nameNext = false;
      }
      i = j;
    } else if (c === 0x7b /* { */) {
      top = { names: [], at: '' };
      frames.push(top);
      nameNext = true;
    } else if (c === 0x5b /* [ */) {
      top = { names: null, at: 0 };
      frames.push(top);
      nameNext = false;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      frames.pop();
      top = frames.length === 0 ? null : frames[frames.length - 1]!;
      nameNext = false;
    } else if (c === 0x2c /* , */ && top !== null) {
      if (top.names === null) (top.at as number)++;
      else nameNext = true;
    }
  }
  return undefined;
}

function found(name: string, frames: readonly Frame[]): DuplicateMember {
  return { name, path: frames.slice(0, -1).map((f) => f.at) };
}
