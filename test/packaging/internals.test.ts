import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { internalsTable } from '../../scripts/deps-check.mjs';

// docs/design.md, "Library internals we reach": the table npm run deps:check reads, held to what the
// code reaches, to package.json's exact pins and to guards whose messages name the internals.
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8');
const pkg = JSON.parse(read('package.json')) as { dependencies: Record<string, string> };
const lock = JSON.parse(read('package-lock.json')) as { packages: Record<string, { version?: string }> };
const table = internalsTable();
const libraries = table.filter((t) => t.library !== 'node');

describe('the internals table (docs/design.md)', () => {
  it('has a row per library whose internals we reach, node included', () => {
    expect(table.map((t) => t.library).sort()).toEqual(['@redis/client', 'express', 'node', 'prom-client', 'undici']);
  });

  it.each(libraries.map((t) => [t.library, t] as const))('%s is pinned exactly in package.json, at the lockfile\'s version and the table\'s', (name, t) => {
    expect(pkg.dependencies[name], `${name} in package.json dependencies`).toMatch(/^\d+\.\d+\.\d+$/);
    expect(pkg.dependencies[name]).toBe(lock.packages[`node_modules/${name}`]?.version);
    expect(t.pinned).toBe(pkg.dependencies[name]);
    expect(t.holds).toContain(t.pinned);
  });

  it('names node\'s pinned lines as test/node-lines.json does', () => {
    const lines = (JSON.parse(read('test/node-lines.json')) as { lines: { version: string }[] }).lines.map((l) => l.version);
    expect(table.find((t) => t.library === 'node')!.pinned.split(/,\s*/)).toEqual(lines);
  });

  it.each(table.map((t) => [t.library, t] as const))('%s: each guard exists and its messages name the library\'s internals', (name, t) => {
    expect(t.guards.length).toBeGreaterThan(0);
    const said = new RegExp(`${name.replace(/[/@.]/g, '\\$&')} internal`);
    expect(t.guards.filter((g) => said.test(read(g))), `${name}: no guard says "${said.source}"`).not.toEqual([]);
  });

  it('names every deep require, private field and rewritten file in src/ and scripts/bundle.mjs', () => {
    const files = (readdirSync(join(ROOT, 'src'), { recursive: true }) as string[]).filter((f) => f.endsWith('.ts')).map((f) => `src/${f}`);
    const rowOf = (library: string) => table.find((t) => t.library === library);
    const missing: string[] = [];
    for (const f of files) {
      const text = read(f);
      // A file of a package instead of its index: req('undici/lib/…'), require('@scope/pkg/dist/…').
      for (const m of text.matchAll(/\b(?:req|require)\('((?:@[^/']+\/)?[^/'.][^/']*)\/[^']+'\)/g)) {
        const row = rowOf(m[1]!);
        if (!row || !row.reached.includes(f)) missing.push(`${f}: ${m[0]}`);
      }
      // A private field of a library's object or of node's: `x._name` (our own code names none so).
      for (const m of text.matchAll(/(?<![\w$])(?:\w+|\))(?:\.\w+)*\._([A-Za-z]\w*)/g)) {
        if (!table.some((t) => t.reached.includes(`_${m[1]}`) && t.reached.includes(f))) missing.push(`${f}: ${m[0]}`);
      }
      for (const m of text.matchAll(/\blatin1Slice|utf8Slice|asciiSlice|ucs2Slice|hexSlice|base64Slice\b/g)) {
        if (!table.some((t) => t.reached.includes(m[0]) && t.reached.includes(f))) missing.push(`${f}: ${m[0]}`);
      }
    }
    // Files of packages the bundler rewrites or leaves out (its onLoad and onResolve filters), but
    // tsc's own dist/ (ours): each names a package a row names, in a row that names the bundler.
    const filters = [...read('scripts/bundle.mjs').matchAll(/\bfilter: \/(.+?)\/ \}/g)].map((m) => m[1]!);
    expect(filters.length).toBeGreaterThanOrEqual(5);
    for (const filter of filters) {
      const path = filter.replace(/\[\\\\\/\]/g, '/').replace(/\\\//g, '/').replace(/\\\./g, '.').replace(/^\^|\$$/g, '');
      if (path.startsWith('/dist/')) continue;
      const named = table.some((t) => t.reached.includes('scripts/bundle.mjs') && (path.includes(`/${t.library}/`) || t.reached.includes(path)));
      if (!named) missing.push(`scripts/bundle.mjs: filter /${filter}/ (${path})`);
    }
    expect(missing).toEqual([]);
  });
});
