import { globSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ONCE } from '../../vitest.config.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

// npm run test:lines runs the ONCE tests on the image's line only (vitest.config.ts): an entry that
// names no file would silently move nothing, and one that names a test executing src on purpose
// would hide it from the other lines, so each entry is held to the files it names.
describe('the tests run once (vitest.config.ts ONCE)', () => {
  it.each(ONCE)('%s names at least one test file', (pattern) => {
    expect(globSync(pattern, { cwd: ROOT })).not.toEqual([]);
  });

  it('leave most of the suite to every line', () => {
    const all = globSync('test/**/*.test.ts', { cwd: ROOT });
    const once = new Set(ONCE.flatMap((p) => globSync(p, { cwd: ROOT })));
    expect(once.size).toBeLessThan(all.length / 4);
  });
});
