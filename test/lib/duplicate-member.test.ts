import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { findDuplicateMember, locateDuplicateMember } from '../../src/lib/duplicate-member.js';

describe('findDuplicateMember', () => {
  it.each([
    ['{"a":1,"a":2}', 'a'],
    ['{"a":1,"b":{"c":[1,2],"c":3}}', 'c'],
    ['[{"x":1},{"y":1,"y":2}]', 'y'],
    ['{"a\\u0062":1,"ab":2}', 'ab'],
    ['{"q\\"":1,"q\\"":2}', 'q"'],
    ['{ "a" : 1 , "a" : 1 }', 'a'],
    ['{"":1,"":2}', ''],
  ])('%s → %s', (text, name) => {
    expect(findDuplicateMember(text)).toBe(name);
  });

  it.each([
    '{"a":1,"b":2}',
    '{"a":{"a":{"a":1}}}',
    '[{"a":1},{"a":2}]',
    '{"a":"\\"a\\":1,\\"a\\":2","b":["a","a"]}',
    '{"a":"{","b":"}","c":"[","d":","}',
    '"a"',
    '[]',
    '{}',
  ])('%s → none', (text) => {
    expect(findDuplicateMember(text)).toBeUndefined();
  });

  it('finds nothing in any JSON.stringify output (which cannot repeat a name)', () => {
    fc.assert(fc.property(fc.json(), (text) => {
        expect(findDuplicateMember(text)).toBeUndefined();
      }), { numRuns: 2000 });
  });

  it('finds a name repeated anywhere in generated JSON', () => {
    fc.assert(
      fc.property(fc.json(), fc.string(), fc.json(), fc.json(), (outer, name, v1, v2) => {
        const obj = `{${JSON.stringify(name)}:${v1},"other":${outer},${JSON.stringify(name)}:${v2}}`;
        const text = `[${outer},{"wrap":${obj}}]`;
        JSON.parse(text); // valid JSON, as the parser guarantees before the scan
        // An earlier duplicate in `outer` is impossible (stringify output), so the name found is ours.
        expect(findDuplicateMember(text)).toBe(name === 'other' ? 'other' : name);
      }),
      { numRuns: 1000 },
    );
  });

  it.each([
    ['{"a":1,"a":2}', 'a', []],
    ['{"checks":[{"a":1},{"b":1,"b":2}]}', 'b', ['checks', 1]],
    ['{"x":[1,[2,3],{"y":{"z":1,"z":2}}]}', 'z', ['x', 2, 'y']],
    ['[{"k":1},{"k":1},{"q":[{},{"k":1,"k":2}]}]', 'k', [2, 'q', 1]],
    ['{"s":"a,b","t":[",",{"u":1,"u":2}]}', 'u', ['t', 1]],
    ['{"a\\u0062":{"c":1,"c":2}}', 'c', ['ab']],
  ])('locates %s: %s in %j', (text, name, path) => {
    JSON.parse(text);
    expect(locateDuplicateMember(text)).toEqual({ name, path });
  });

  it('locates what findDuplicateMember finds, at the object the generator put it in', () => {
    fc.assert(
      fc.property(fc.array(fc.json(), { maxLength: 4 }), fc.nat(), fc.string(), fc.json(), (items, at, name, v) => {
        const index = items.length === 0 ? 0 : at % (items.length + 1);
        const parts = items.slice();
        parts.splice(index, 0, `{"wrap":{${JSON.stringify(name)}:${v},${JSON.stringify(name)}:${v}}}`);
        const text = `{"list":[${parts.join(',')}]}`;
        JSON.parse(text);
        expect(locateDuplicateMember(text)).toEqual({ name, path: ['list', index, 'wrap'] });
        expect(findDuplicateMember(text)).toBe(name);
      }),
      { numRuns: 1000 },
    );
  });
});
