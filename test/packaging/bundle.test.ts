import { readdirSync, readFileSync } from 'node:fs';
import { join, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
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
    // The banner's own require (first line of each file) makes one for the externals only.
    const banner = /^const require = \(id\) => process\.getBuiltinModule\(id\) \?\? .*\n/;
    for (const f of files) {
      const text = readFileSync(new URL(f, dir), 'utf8');
      expect(text, f).toMatch(banner);
      expect(text.replace(banner, ''), f).not.toMatch(/createRequire\(import\.meta\.url\)\(|\breq\(['"]/);
    }
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

// scripts/bundle.mjs cuts the Redis client's command table to REDIS_COMMANDS_USED (the sidecar sends
// its own commands through sendCommand). A command the library itself uses, left out of the table,
// would be a method missing at run time, on a path (a handshake, cluster discovery) only some
// topologies take: held here against the library's own source.
describe("the bundle's Redis command table", () => {
  const lib = fileURLToPath(new URL('../../node_modules/@redis/client/dist/lib/', import.meta.url));
  const index = readFileSync(join(lib, 'commands/index.js'), 'utf8');
  /** Every command of the full table: `NAME` → its camelCase method. */
  const all = new Map([...index.matchAll(/^\s+([A-Z][A-Z0-9_]*): (\w+)_1\.default,\n\s+(\w+): \2_1\.default,$/gm)].map((m) => [m[1]!, m[3]!]));
  const sources = (readdirSync(lib, { recursive: true }) as string[])
    .filter((f) => f.endsWith('.js') && !f.startsWith('commands') && !f.startsWith(`sentinel${sep}commands`))
    .map((f) => readFileSync(join(lib, f), 'utf8'));

  it('holds every command the client library names or calls on its clients', async () => {
    const { REDIS_COMMANDS_USED } = await import('../../scripts/bundle-config.mjs');
    expect(all.size, '@redis/client internal dist/lib/commands/index.js (scripts/bundle.mjs redis-commands): its table is no longer read as NAME: x_1.default, name: x_1.default').toBeGreaterThan(300);
    const named = new Set(sources.flatMap((src) => [...src.matchAll(/commands_1\.default\.([A-Z][A-Z0-9_]*)/g)].map((m) => m[1]!)));
    const kept = new Set(REDIS_COMMANDS_USED.flatMap((c) => [c, all.get(c)]));
    expect([...named].filter((c) => !kept.has(c)), '@redis/client internal: the library names commands the bundle\'s table (scripts/bundle-config.mjs) drops').toEqual([]);
    // A command's method called in the library (`client.clusterSlots()`) and not defined by a class of its own.
    const called = new Set(sources.flatMap((src) => [...src.matchAll(/\.([a-z][A-Za-z]*)\(/g)].map((m) => m[1]!)));
    const defined = (name: string) => sources.some((src) => new RegExp(`^\\s+(?:async\\s+)?${name}\\s*(?:\\(|=)`, 'm').test(src));
    const missing = [...all.values()].filter((m) => called.has(m) && !kept.has(m) && !defined(m)).sort();
    // What the scan finds that is no client command call here: a new name fails until it is read.
    expect(missing, '@redis/client internal: the library calls command methods the bundle\'s table (scripts/bundle-config.mjs) drops').toEqual([
      'digest', // crypto's Hash (lua-script.js)
      'hScan', // hScan, hScanNoValues, scan, sScan, zScan: only the client's *Iterator methods call them,
      'hScanNoValues', // and the sidecar calls none (held below)
      'keys', // Object.keys and Map.keys
      'publish', // diagnostics channels
      'sScan',
      'scan',
      'sort', // arrays
      'zScan',
    ]);
    const ours = (readdirSync(fileURLToPath(new URL('../../src/redis/', import.meta.url))) as string[]).map((f) => readFileSync(fileURLToPath(new URL(`../../src/redis/${f}`, import.meta.url)), 'utf8'));
    expect(ours.filter((src) => /[sShHzZ]?[sS]canIterator\(/.test(src))).toEqual([]);
    expect(REDIS_COMMANDS_USED.filter((c) => !all.has(c)), '@redis/client internal: commands the sidecar sends are gone from the library').toEqual([]);
  });
});
