import { deflateSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MessageReader, type RequestRefusal } from '../../src/grpc/message-reader.js';
import { grpcFrame } from '../helpers/h2-raw.js';

/** Feeds `bytes` cut at `cuts` (positions), then ends: the message, or the first refusal. */
function read(bytes: Buffer, max: number, cuts: number[] = [], encoding?: string): Buffer | RequestRefusal {
  const r = new MessageReader(max, encoding);
  let at = 0;
  for (const cut of [...new Set(cuts)].filter((c) => c > 0 && c < bytes.length).sort((a, b) => a - b).concat(bytes.length)) {
    const refused = r.push(bytes.subarray(at, cut));
    if (refused) return refused;
    at = cut;
  }
  return r.end();
}

const problem = (x: Buffer | RequestRefusal): string => (Buffer.isBuffer(x) ? 'message' : x.problem);

describe('MessageReader: one unary request message', () => {
  it.each<[string, Buffer, string | undefined, string]>([
    ['nothing', Buffer.alloc(0), undefined, 'no_message'],
    ['an empty message', grpcFrame(Buffer.alloc(0)), undefined, 'message'],
    ['a prefix cut short', Buffer.from([0, 0]), undefined, 'truncated'],
    ['a body cut short', grpcFrame(Buffer.from('abc'), 0, 10), undefined, 'truncated'],
    ['two messages', Buffer.concat([grpcFrame(Buffer.from('a')), grpcFrame(Buffer.from('b'))]), undefined, 'second_message'],
    ['a message and a stray byte', Buffer.concat([grpcFrame(Buffer.from('a')), Buffer.from([0])]), undefined, 'second_message'],
    ['a declared length over the most', grpcFrame(Buffer.alloc(0), 0, 101), undefined, 'too_large'],
    ['flag 2', grpcFrame(Buffer.from('a'), 2), undefined, 'compression'],
    ['compressed, no grpc-encoding', grpcFrame(Buffer.from('a'), 1), undefined, 'compression'],
    ['compressed, identity', grpcFrame(Buffer.from('a'), 1), 'identity', 'compression'],
    ['compressed, an unknown encoding', grpcFrame(Buffer.from('a'), 1), 'br', 'compression'],
    ['gzip that is not gzip', grpcFrame(Buffer.from('abc'), 1), 'gzip', 'compression'],
  ])('%s → %s', (_name, bytes, encoding, expected) => {
    expect(problem(read(bytes, 100, [], encoding))).toBe(expected);
  });

  it('gzip and deflate are inflated; past the most once inflated, too_large', () => {
    const m = Buffer.from('a CheckRequest, say');
    expect(read(grpcFrame(gzipSync(m), 1), 100, [], 'gzip')).toEqual(m);
    expect(read(grpcFrame(deflateSync(m), 1), 100, [], 'deflate')).toEqual(m);
    expect(problem(read(grpcFrame(gzipSync(Buffer.alloc(1000)), 1), 100, [], 'gzip'))).toBe('too_large');
  });

  it('a declared length over the most is refused at the prefix, before any of the body', () => {
    const r = new MessageReader(100, undefined);
    expect(r.push(grpcFrame(Buffer.alloc(0), 0, 8 * 1024 * 1024))?.problem).toBe('too_large');
  });

  it('counts as pending only the bytes of a message not arrived whole', () => {
    const r = new MessageReader(100, undefined);
    r.push(Buffer.from([0, 0, 0]));
    expect(r.pending).toBe(3);
    r.push(Buffer.from([0, 4, 1, 2]));
    expect(r.pending).toBe(7);
    r.push(Buffer.from([3, 4]));
    expect(r.pending).toBe(0);
  });

  it('property: one message of any size up to the most, cut anywhere, reads back as sent', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.array(fc.nat({ max: 310 }), { maxLength: 12 }), (body, cuts) => {
        const m = Buffer.from(body);
        const got = read(grpcFrame(m), 300, cuts);
        return Buffer.isBuffer(got) && got.equals(m);
      }),
    );
  });

  it('property: a frame cut short anywhere is never a message; anything after a whole one is a second', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 200 }), fc.nat(), fc.uint8Array({ minLength: 1, maxLength: 20 }), (body, at, extra) => {
        const whole = grpcFrame(Buffer.from(body));
        const cut = at % whole.length;
        const short = problem(read(whole.subarray(0, cut), 300));
        const after = problem(read(Buffer.concat([whole, Buffer.from(extra)]), 300));
        return short === (cut === 0 ? 'no_message' : 'truncated') && after === 'second_message';
      }),
    );
  });
});
