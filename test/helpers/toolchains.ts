import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

// The toolchains that run the Python, Go and Java files of docs/clients.md (test/setup.sh installs them).

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Debian's interpreter, which test/setup.sh installs, when present: a version manager's shim on PATH costs seconds a run. */
export const PYTHON = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

/** Each toolchain, and the Debian package test/setup.sh installs it from. */
export const TOOLS = { [PYTHON]: 'python3', go: 'golang-go', javac: 'default-jdk-headless', java: 'default-jdk-headless' } as const;

/** Fails, naming each missing toolchain and its package, unless every one is on PATH (never skips). */
export function requireToolchains(): void {
  const missing = Object.entries(TOOLS).filter(([cmd]) => spawnSync('sh', ['-c', `command -v ${cmd}`]).status !== 0);
  if (missing.length > 0) {
    throw new Error(`missing toolchains: ${missing.map(([cmd, pkg]) => `${cmd} (Debian: ${pkg})`).join(', ')}; bash test/setup.sh installs them`);
  }
}

/** Runs a build step (`go build …`, `javac …`) from the repository root; throws with its output when it fails. */
export function buildWith(argv: string[]): void {
  const r = spawnSync(argv[0]!, argv.slice(1), { cwd: ROOT, encoding: 'utf8', env: process.env });
  if (r.status !== 0) throw new Error(`${argv.join(' ')} failed:\n${r.stdout}${r.stderr}`);
}
