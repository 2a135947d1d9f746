#!/usr/bin/env node
/**
 * The image's software bill of materials: CycloneDX 1.5 JSON of every production dependency, made
 * from package-lock.json (no node_modules needed), written to stdout or to `--output-file PATH`.
 *
 *   npm run sbom -- --output-file sbom.cdx.json      (the Dockerfile's build stage runs it)
 *
 * npm resolves the production tree (`npm ls --package-lock-only --omit=dev --all`: a package a
 * development one shares is kept); this turns it into components and a dependency graph. Not
 * `npm sbom --omit=dev`: it drops the production packages a development one shares (undici,
 * @grpc/grpc-js and @opentelemetry/api among them, npm 11.19). Not @cyclonedx/cyclonedx-npm: 88
 * packages (a native XML validator among them) for what these lines do. Same lockfile, same bytes:
 * no timestamp unless SOURCE_DATE_EPOCH gives one, and a serial number derived from the lockfile.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** `pkg:npm/%40scope/name@version`, as the purl spec has npm names. */
const purl = (name, version) => `pkg:npm/${name.replace(/^@/, '%40')}@${version}`;

/** An SRI integrity (`sha512-<base64>`) as CycloneDX hashes. */
function hashes(integrity) {
  const algs = { sha512: 'SHA-512', sha384: 'SHA-384', sha256: 'SHA-256', sha1: 'SHA-1' };
  return (integrity ?? '')
    .split(/\s+/)
    .map((sri) => /^(sha512|sha384|sha256|sha1)-(.+)$/.exec(sri))
    .filter(Boolean)
    .map(([, alg, b64]) => ({ alg: algs[alg], content: Buffer.from(b64, 'base64').toString('hex') }));
}

/** A license field as CycloneDX licenses: an SPDX id alone, else the expression. */
function licenses(license) {
  if (typeof license !== 'string' || license === '') return undefined;
  return /^[A-Za-z0-9.+-]+$/.test(license) ? [{ license: { id: license } }] : [{ expression: license }];
}

export function sbom(root = ROOT) {
  const ls = spawnSync('npm', ['ls', '--package-lock-only', '--omit=dev', '--all', '--long', '--json'], { cwd: root, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (ls.status !== 0 && !ls.stdout) throw new Error(`npm ls failed:\n${ls.stderr}`);
  const tree = JSON.parse(ls.stdout);
  if (tree.problems?.length) throw new Error(`npm ls: the lockfile's production tree has problems:\n${tree.problems.join('\n')}`);
  const ref = (n) => `${n.name}@${n.version}`;
  const components = new Map();
  const edges = new Map();
  const walk = (node) => {
    // An optional peer dependency nobody installs is listed as `{}`: nothing ships.
    const deps = Object.entries(node.dependencies ?? {})
      .filter(([, d]) => typeof d.version === 'string')
      .map(([name, d]) => ({ ...d, name: d.name ?? name }));
    const from = node === tree ? 'root' : ref(node);
    edges.set(from, new Set([...(edges.get(from) ?? []), ...deps.map(ref)]));
    for (const d of deps) {
      if (!components.has(ref(d))) {
        const slash = d.name.startsWith('@') ? d.name.indexOf('/') : -1;
        components.set(ref(d), {
          type: 'library',
          'bom-ref': ref(d),
          ...(slash > 0 ? { group: d.name.slice(0, slash), name: d.name.slice(slash + 1) } : { name: d.name }),
          version: d.version,
          purl: purl(d.name, d.version),
          ...(hashes(d.integrity).length > 0 ? { hashes: hashes(d.integrity) } : {}),
          ...(licenses(d.license) ? { licenses: licenses(d.license) } : {}),
        });
      }
      walk(d);
    }
  };
  walk(tree);
  const lock = readFileSync(`${root}/package-lock.json`);
  const digest = createHash('sha256').update(lock).digest('hex');
  const serial = `urn:uuid:${digest.slice(0, 8)}-${digest.slice(8, 12)}-5${digest.slice(13, 16)}-${((parseInt(digest[16], 16) & 3) | 8).toString(16)}${digest.slice(17, 20)}-${digest.slice(20, 32)}`;
  const epoch = process.env.SOURCE_DATE_EPOCH;
  const appRef = `${tree.name}@${tree.version}`;
  return {
    bomFormat: 'CycloneDX',
    specVersion: '1.5',
    serialNumber: serial,
    version: 1,
    metadata: {
      ...(epoch ? { timestamp: new Date(Number(epoch) * 1000).toISOString() } : {}),
      tools: { components: [{ type: 'application', name: 'scripts/sbom.mjs', description: 'npm ls --package-lock-only --omit=dev' }] },
      component: { type: 'application', 'bom-ref': appRef, name: tree.name, version: tree.version, purl: purl(tree.name, tree.version), ...(licenses(tree.license) ? { licenses: licenses(tree.license) } : {}) },
    },
    components: [...components.values()].sort((a, b) => (a['bom-ref'] < b['bom-ref'] ? -1 : 1)),
    dependencies: [...edges].map(([from, to]) => ({ ref: from === 'root' ? appRef : from, dependsOn: [...to].sort() })).sort((a, b) => (a.ref < b.ref ? -1 : 1)),
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const i = args.indexOf('--output-file');
  if (args.some((a, j) => a !== '--output-file' && j !== i + 1) || (i >= 0 && !args[i + 1])) {
    process.stderr.write('usage: node scripts/sbom.mjs [--output-file PATH]\n');
    process.exit(2);
  }
  const text = `${JSON.stringify(sbom(), null, 2)}\n`;
  if (i >= 0) writeFileSync(args[i + 1], text);
  else process.stdout.write(text);
}
