import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';

// The CLI ships as an esbuild bundle (scripts/bundle.mjs, dist/bundle/): what it holds, and that it runs.
const dir = new URL('../../dist/bundle/', import.meta.url);
const meta = JSON.parse(readFileSync(new URL('meta.json', dir), 'utf8')) as { inputs: Record<string, unknown> };
const lock = JSON.parse(readFileSync(new URL('../../package-lock.json', import.meta.url), 'utf8')) as { packages: Record<string, { dev?: boolean; version?: string }> };
const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

/** The package-lock key of the package a bundled file belongs to (`node_modules/a/node_modules/@s/b`). */
function packageOf(input: string): string | null {
  return /^(.*node_modules\/(?:@[^/]+\/)?[^/]+)\//.exec(input)?.[1] ?? null;
}

describe('the CLI bundle', () => {
  it('holds no createRequire(import.meta.url) left for node to resolve at run time (every require was bundled)', () => {
    const files = readdirSync(dir).filter((f) => f.endsWith('.js'));
    expect(files.length).toBeGreaterThan(5);
    for (const f of files) expect(readFileSync(new URL(f, dir), 'utf8'), f).not.toMatch(/createRequire\(import\.meta\.url\)\(|\breq\(['"]/);
  });

  it('holds production packages only: a development one would ship in the image without being in its SBOM', () => {
    const packages = new Set(Object.keys(meta.inputs).map(packageOf).filter((p): p is string => p !== null));
    expect(packages.size).toBeGreaterThan(10);
    const unknown = [...packages].filter((p) => lock.packages[p] === undefined);
    const dev = [...packages].filter((p) => lock.packages[p]?.dev === true);
    expect(unknown).toEqual([]);
    expect(dev).toEqual([]);
  });

  it('runs: dist/cli.js is its entry, and the version comes from package.json', async () => {
    expect(readFileSync(new URL('../cli.js', dir), 'utf8')).toContain("import './bundle/cli.js'");
    const r = await runCli(['--version']);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe(pkg.version);
  });
});
