import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * The node arguments that run the CLI: the build (`dist/cli.js`, as users run it; test/global-setup.ts
 * builds it when src/ is newer), or the source through tsx.
 */
export function cliEntry(from: 'src' | 'dist' = 'dist'): string[] {
  return from === 'src' ? ['--import', 'tsx', 'src/cli.ts'] : ['dist/cli.js'];
}

/**
 * Runs the CLI to completion: the build by default (`dist/cli.js`, as users run it), or the source;
 * `stdin` is written to it and closed (nothing by default).
 */
export function runCli(args: readonly string[], env: Record<string, string> = {}, from: 'src' | 'dist' = 'dist', stdin: Buffer | string = ''): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...cliEntry(from), ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(stdin);
  });
}

/** Starts a long-running CLI command and resolves once a stdout line matches `ready`. */
export function startCli(args: string[], ready: RegExp, env: Record<string, string> = {}): Promise<{ child: ChildProcess; line: string; output: () => string; exited: Promise<number | null> }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...cliEntry(), ...args], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env } });
    let stdout = '';
    let stderr = '';
    let done = false;
    const exited = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
      const line = stdout.split('\n').find((l) => ready.test(l));
      if (line && !done) {
        done = true;
        resolve({ child, line, output: () => stdout, exited });
      }
    });
    void exited.then((code) => {
      if (!done) reject(new Error(`exited ${code} before ready:\n${stdout}\n${stderr}`));
    });
  });
}
