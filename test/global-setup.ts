import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

// Tests that spawn the CLI run the build (`dist/cli.js`), as users do: what ships is what is tested,
// and a process starts in half the time it takes through tsx. `npm test` builds first; a single file
// run with `npx vitest run …` gets the build here when src/ changed since the last one.

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const BUILT = join(ROOT, 'dist/cli.js');

function newestUnder(path: string): number {
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = st.mtimeMs;
  for (const name of readdirSync(path)) newest = Math.max(newest, newestUnder(join(path, name)));
  return newest;
}

/**
 * Builds when needed, and gives the run a temporary directory of its own: every test process (forked
 * after this) and every server they spawn inherit TMPDIR, so the Redis dirs, configs, secrets and logs
 * the tests make under `os.tmpdir()` all go when the run ends, passed or failed; before, each run left
 * a few hundred directories in /tmp.
 */
export default function setup(): () => void {
  build();
  const runDir = mkdtempSync(join(tmpdir(), 'cs-tests-'));
  process.env.TMPDIR = runDir;
  return () => rmSync(runDir, { recursive: true, force: true });
}

function build(): void {
  const sources = Math.max(newestUnder(join(ROOT, 'src')), newestUnder(join(ROOT, 'scripts')), ...['package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json'].map((f) => statSync(join(ROOT, f)).mtimeMs));
  if (existsSync(BUILT) && statSync(BUILT).mtimeMs >= sources) return;
  const tsc = spawnSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], { cwd: ROOT, encoding: 'utf8' });
  if (tsc.status !== 0) throw new Error(`the build the CLI tests run failed (npm run build):\n${tsc.stdout}${tsc.stderr}`);
  // As npm run build: the .proto files ship beside the code.
  cpSync(join(ROOT, 'src/grpc/proto'), join(ROOT, 'dist/grpc/proto'), { recursive: true });
  // And the CLI's bundle, which dist/cli.js runs (scripts/bundle.mjs).
  const bundle = spawnSync(process.execPath, [join(ROOT, 'scripts/bundle.mjs')], { cwd: ROOT, encoding: 'utf8' });
  if (bundle.status !== 0) throw new Error(`the CLI's bundle failed (npm run build):\n${bundle.stdout}${bundle.stderr}`);
}
