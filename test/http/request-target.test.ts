import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CHECK_PATH, judgeTarget } from '../../src/http/request-target.js';

// Whatever passes through is read the same by every way a server may read a path: the WHATWG
// resolver, a decoder that resolves dot segments after decoding, one that folds slashes or
// backslashes, one that decodes twice, one that matches case-insensitively.

/** Pieces a path is made of, the dangerous ones over-represented. */
const piece = fc.constantFrom(
  '/', '/', '.', '..', '%2e', '%2E', '%2f', '%5c', '%25', '%00', '%09', '%20', '%3b', '%3f', '%23', ';', '\\', 'a', 'v1', 'V1',
  'authorization', 'check', 'Check', '%63', '%ef%bc%8f', '%c3%a5', '%c4%b1', '%e2%80%8b', '|', ':', '@', '~', '-', '?', '#', 'admin',
);
const target = fc.array(piece, { maxLength: 12 }).map((p) => `/v1/${p.join('')}`);

/** Percent-decodes, or null when a decoder would refuse. */
const decode = (s: string): string | null => {
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
};
/** Resolves dot segments the way RFC 3986 §5.2.4 does. */
const resolve = (path: string): string => new URL(path.replace(/\\/g, '/'), 'http://x.invalid').pathname;

describe('judgeTarget (property): a target that passes through is already its own normal form', () => {
  it('every reading of the path is the path as written, and none of them is the check path or leaves /v1/', () => {
    fc.assert(
      fc.property(target, (t) => {
        const verdict = judgeTarget(t);
        if (verdict.kind !== 'passthrough') return;
        const path = t.split('?')[0]!;
        expect(resolve(path)).toBe(path);
        expect(path).not.toMatch(/\/\/|\\|;|#/);
        const once = decode(path);
        expect(once).not.toBeNull();
        const readings = [once!, decode(once!) ?? once!, once!.normalize('NFKC'), once!.toLowerCase(), once!.toUpperCase().toLowerCase()];
        for (const r of readings) {
          expect(r.replace(/\\/g, '/').replace(/\/+/g, '/')).toBe(r);
          expect(resolve(r.normalize('NFKC'))).toBe(resolve(r));
          expect(resolve(r).startsWith('/v1/')).toBe(true);
          expect(r.toLowerCase().startsWith(CHECK_PATH)).toBe(false);
        }
      }),
      { numRuns: 5000 },
    );
  });

  it.each([
    ['/v1/customers/c-1', 'passthrough'],
    ['/admin', 'not_found'],
    ['/v1', 'not_found'],
    ['/', 'not_found'],
    ['/v1/authorization/check.json', 'refused'],
    ['/v1/customers/%c4%b1', 'refused'], // dotless ı upper-cases to ASCII I
    ['/v1/customers/%e2%84%aa', 'refused'], // the Kelvin sign folds to k
    ['/v1/customers/a%c2%adb', 'refused'], // soft hyphen
    ['/v1/customers/a%e2%80%8bb', 'refused'], // zero-width space
    ['/v1/customers/a%c2%85b', 'refused'], // C1 control NEL
    ['/v1/..%3f', 'refused'], // decoded, then parsed: /v1/.. and a query (found by the property above)
  ])('%s → %s', (t, kind) => {
    expect(judgeTarget(t).kind).toBe(kind);
  });
});
