import { readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The client runs inside the application and ships alone as @consent-sidecar/client, a package with
// no runtime dependencies: it must not drag the sidecar's own machinery (express, the logger,
// prom-client, OpenTelemetry, Redis) nor any package into it. Its modules may import each other,
// modules with no imports of their own (the duplicate-member scanner the sidecar's parser uses, so
// both read answers alike), and node's built-ins: not even undici (node's own http carries it).

const SRC = fileURLToPath(new URL('../../src/', import.meta.url));
const specifiers = (file: string): string[] =>
  [...readFileSync(file, 'utf8').matchAll(/(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s+'([^']+)'|import\('([^']+)'\)/g)].map((m) => m[1] ?? m[2]!);

describe('consent-sidecar/client imports', () => {
  it('reaches only its own modules, pure modules without imports and node built-ins: no package at all', () => {
    const seen = new Set<string>();
    const outside: string[] = [];
    const external = new Set<string>();
    const visit = (file: string): void => {
      if (seen.has(file)) return;
      seen.add(file);
      const inClient = relative(SRC, file).startsWith('client/');
      const deps = specifiers(file);
      if (!inClient && deps.length > 0) outside.push(`${relative(SRC, file)} imports ${deps.join(', ')}`);
      for (const d of deps) {
        if (d.startsWith('.')) visit(join(dirname(file), d.replace(/\.js$/, '.ts')));
        else external.add(d);
      }
    };
    visit(join(SRC, 'client/index.ts'));
    expect(outside).toEqual([]);
    expect([...external].filter((d) => !d.startsWith('node:'))).toEqual([]);
    expect([...seen].map((f) => relative(SRC, f)).sort()).toContain('lib/duplicate-member.ts');
  });
});
