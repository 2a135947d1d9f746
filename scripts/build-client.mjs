/**
 * Builds packages/client (@consent-sidecar/client) from src/client: one ES module and one CommonJS
 * file (esbuild, each with the modules it imports inside: the client's own and the duplicate-member
 * scanner it shares with the sidecar; node's built-ins stay imports), and the declarations tsc writes
 * for src/client, as .d.ts for `import` and .d.cts for `require`. The package has no dependencies:
 * what it imports beside node's built-ins is inside these files.
 *
 *   node scripts/build-client.mjs      (the package's prepack runs it: npm pack in packages/client)
 *
 * Not part of `npm run build`: the image build runs that, and ships no client.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = join(root, 'packages/client/dist');
const entry = join(root, 'src/client/index.ts');

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

for (const [format, file] of [['esm', 'index.js'], ['cjs', 'index.cjs']]) {
  const result = await build({
    entryPoints: [entry],
    outfile: join(out, file),
    bundle: true,
    format,
    platform: 'node',
    target: 'node22',
    // Anything but node's built-ins inside the bundle would be a dependency the package does not declare.
    packages: 'external',
    legalComments: 'none',
    metafile: true,
    logLevel: 'warning',
  });
  const imported = Object.values(result.metafile.outputs).flatMap((o) => o.imports.map((i) => i.path));
  const foreign = imported.filter((p) => !p.startsWith('node:'));
  if (foreign.length > 0) throw new Error(`packages/client/dist/${file} imports ${foreign.join(', ')}: the client may import only node's built-ins`);
}

// Declarations: tsc's, for src/client only (its private modules' types are not part of them).
const types = mkdtempSync(join(tmpdir(), 'client-types-'));
try {
  const tsc = spawnSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(root, 'tsconfig.client.json'), '--outDir', types], { cwd: root, encoding: 'utf8' });
  if (tsc.status !== 0) throw new Error(`tsc -p tsconfig.client.json failed:\n${tsc.stdout}${tsc.stderr}`);
  // The declarations index.d.ts reaches, and no other (a private module's are not the package's face).
  const reached = ['index.d.ts'];
  for (let i = 0; i < reached.length; i++) {
    const name = reached[i];
    const text = readFileSync(join(types, 'client', name), 'utf8');
    for (const m of text.matchAll(/from '\.\/([^']+)\.js'/g)) if (!reached.includes(`${m[1]}.d.ts`)) reached.push(`${m[1]}.d.ts`);
    if (/from '\.\.\//.test(text)) throw new Error(`src/client/${name.replace(/\.d\.ts$/, '.ts')}: its declaration reaches outside src/client`);
    writeFileSync(join(out, name), text);
    // The same declarations for `require`: a .d.cts that imports .d.ts would be typed as an ES module.
    writeFileSync(join(out, name.replace(/\.d\.ts$/, '.d.cts')), text.replace(/(from '\.\/[^']+)\.js'/g, "$1.cjs'"));
  }
} finally {
  rmSync(types, { recursive: true, force: true });
}
