import { describe, expect, it } from 'vitest';
import { identityOf, readPage, RedecError } from '../../src/redec/index.js';

const AUTO = { itemsField: null, cursorParam: 'cursor' };

describe('page field rules', () => {
  it.each([
    [{ items: [{ a: 1 }], nextCursor: null }, 'items'],
    [{ items: [], other: [{ a: 1 }], nextCursor: 'x' }, 'items'],
    [{ records: [{ a: 1 }], total: 1, nextCursor: null }, 'records'],
    [{ records: [], nextCursor: null }, 'records'],
    [{ records: [{ a: 1 }], tags: ['x'], nextCursor: null }, 'records'],
  ])('%j: records from %s', (page, field) => {
    expect(readPage(page, AUTO).itemsField).toBe(field);
  });

  it.each([
    [[], 'not an object'],
    [{ nextCursor: null }, 'no array'],
    [{ a: [{}], b: [{}], nextCursor: null }, 'two arrays of objects'],
    [{ items: [1], nextCursor: null }, 'items not objects'],
    [{ items: [{}], nextCursor: '' }, 'empty cursor'],
    [{ items: [{}], nextCursor: 3 }, 'numeric cursor'],
    [{ items: [{}] }, 'no nextCursor'],
  ] as [unknown, string][])('%j is malformed (%s)', (page) => {
    expect(() => readPage(page, AUTO)).toThrow(expect.objectContaining({ code: 'ERR_REDEC_MALFORMED_PAGE' }) as RedecError);
  });

  it('a configured field is used as is', () => {
    expect(readPage({ a: [{ x: 1 }], b: [{ y: 2 }], nextCursor: null }, { itemsField: 'b', cursorParam: 'c' }).items).toEqual([{ y: 2 }]);
    expect(() => readPage({ items: [{}], nextCursor: null }, { itemsField: 'b', cursorParam: 'c' })).toThrow(RedecError);
  });
});

describe('record identity', () => {
  it('is the id when it is a string, else a hash that ignores member order', () => {
    expect(identityOf({ id: 'nrq_1', x: 1 })).toBe('nrq_1');
    const h = identityOf({ a: 1, b: { c: [1, 2], d: 'x' } });
    expect(h).toMatch(/^[0-9a-f]{32}$/);
    expect(identityOf({ b: { d: 'x', c: [1, 2] }, a: 1 })).toBe(h);
    expect(identityOf({ a: 1, b: { c: [2, 1], d: 'x' } })).not.toBe(h);
    expect(identityOf({ id: 7, a: 1 })).toMatch(/^[0-9a-f]{32}$/);
  });
});
