import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { until } from './wait.js';

/**
 * Debian's Caddy (package `caddy`), or the one on PATH. A missing one fails the test, saying how to
 * get it: the Caddy recipe is only proven with a real Caddy.
 */
export function caddyBinary(): string {
  if (existsSync('/usr/bin/caddy')) return '/usr/bin/caddy';
  const which = spawnSync('sh', ['-c', 'command -v caddy'], { encoding: 'utf8' });
  if (which.status === 0 && which.stdout.trim() !== '') return which.stdout.trim();
  throw new Error('caddy is missing: run bash test/setup.sh (Debian/Ubuntu: apt-get install --no-install-recommends caddy)');
}

export interface RunningCaddy {
  readonly url: string;
  output(): string;
  close(): Promise<void>;
}

const accepts = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const s = connect(port, '127.0.0.1', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });

/**
 * Runs `caddy run` on a Caddyfile, its config and data directories private to the run (nothing in
 * the home directory), and resolves once `port` accepts connections.
 */
export async function startCaddy(caddyfile: string, port: number): Promise<RunningCaddy> {
  const bin = caddyBinary();
  const dir = await mkdtemp(join(tmpdir(), 'consent-sidecar-caddy-'));
  await writeFile(join(dir, 'Caddyfile'), caddyfile);
  let out = '';
  const child: ChildProcess = spawn(bin, ['run', '--config', join(dir, 'Caddyfile'), '--adapter', 'caddyfile'], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? '', HOME: dir, XDG_CONFIG_HOME: join(dir, 'config'), XDG_DATA_HOME: join(dir, 'data') },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const close = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await Promise.race([exited, sleep(5000).then(() => child.kill('SIGKILL'))]);
      await exited;
    }
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await until(async () => {
      if (child.exitCode !== null) throw new Error(`caddy exited ${child.exitCode}:\n${out}`);
      return accepts(port);
    }, `caddy listening on ${port}`);
  } catch (err) {
    await close();
    throw err;
  }
  return { url: `http://127.0.0.1:${port}`, output: () => out, close };
}
