import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { sbom } from '../../scripts/sbom.mjs';

// The image's SBOM (scripts/sbom.mjs, run by the Dockerfile's build stage): what it lists is held to
// the lockfile read here on its own terms, every package npm marks as not development-only.
const lock = JSON.parse(readFileSync(new URL('../../package-lock.json', import.meta.url), 'utf8')) as {
  packages: Record<string, { name?: string; version?: string; dev?: boolean; integrity?: string; license?: string }>;
};
const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { name: string; version: string; dependencies: Record<string, string>; devDependencies: Record<string, string> };

interface Component { 'bom-ref': string; group?: string; name: string; version: string; purl: string; hashes?: { alg: string; content: string }[]; licenses?: unknown[] }
interface Bom { bomFormat: string; specVersion: string; serialNumber: string; metadata: { component: { name: string; version: string } }; components: Component[]; dependencies: { ref: string; dependsOn: string[] }[] }

const nameAt = (path: string, name?: string): string => name ?? path.replace(/^.*node_modules\//, '');
const production = Object.entries(lock.packages).filter(([path, p]) => path !== '' && p.dev !== true);

describe('the SBOM from the lockfile (scripts/sbom.mjs)', () => {
  const bom = sbom() as Bom;
  const fullName = (c: Component): string => (c.group ? `${c.group}/${c.name}` : c.name);

  it('is CycloneDX 1.5 of this package, the same bytes for the same lockfile', () => {
    expect([bom.bomFormat, bom.specVersion]).toEqual(['CycloneDX', '1.5']);
    expect(bom.metadata.component).toMatchObject({ name: pkg.name, version: pkg.version });
    expect(bom.serialNumber).toMatch(/^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(JSON.stringify(sbom())).toBe(JSON.stringify(bom));
  });

  it('lists exactly the packages the lockfile does not mark development-only, each with its version, purl and hash', () => {
    expect(new Set(bom.components.map((c) => c['bom-ref']))).toEqual(new Set(production.map(([path, p]) => `${nameAt(path, p.name)}@${p.version}`)));
    for (const c of bom.components) {
      expect(c.purl).toBe(`pkg:npm/${fullName(c).replace(/^@/, '%40')}@${c.version}`);
      const entry = production.find(([path, p]) => nameAt(path, p.name) === fullName(c) && p.version === c.version)![1];
      expect(c.hashes?.[0]?.content, c['bom-ref']).toBe(Buffer.from(entry.integrity!.replace(/^sha512-/, ''), 'base64').toString('hex'));
    }
  });

  it('holds every production dependency, the ones a development dependency shares among them, and no development-only one', () => {
    const names = new Set(bom.components.map(fullName));
    expect(Object.keys(pkg.dependencies).filter((d) => !names.has(d))).toEqual([]);
    // npm sbom --omit=dev drops these three (npm 11.19): shared with development packages.
    for (const shared of ['undici', '@grpc/grpc-js', '@opentelemetry/api']) expect(names.has(shared), shared).toBe(true);
    const devOnly = Object.keys(pkg.devDependencies).filter((d) => lock.packages[`node_modules/${d}`]?.dev === true);
    expect(devOnly.length).toBeGreaterThan(10);
    expect(devOnly.filter((d) => names.has(d))).toEqual([]);
  });

  it('gives the dependency graph: the application depends on exactly its production dependencies', () => {
    const app = bom.dependencies.find((d) => d.ref === `${pkg.name}@${pkg.version}`)!;
    expect(app.dependsOn.map((r) => r.slice(0, r.lastIndexOf('@'))).sort()).toEqual(Object.keys(pkg.dependencies).sort());
    const refs = new Set(bom.components.map((c) => c['bom-ref']));
    for (const d of bom.dependencies) for (const to of d.dependsOn) expect(refs.has(to), `${d.ref} -> ${to}`).toBe(true);
  });
});
