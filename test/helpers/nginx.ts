import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/** The forward-auth example the shop chart ships and docs/decision-api.md shows; the nginx tests run it. */
export const SHIPPED_NGINX_CONF = new URL('../../charts/examples/shop/files/nginx-forward-auth.conf', import.meta.url);

/**
 * Debian's nginx (`nginx-light` has `auth_request`), or the one on PATH. A missing nginx fails the
 * test, saying how to get it: the forward-auth example is only proven with a real proxy.
 */
export function nginxBinary(): string {
  for (const candidate of ['/usr/sbin/nginx', '/usr/local/sbin/nginx']) if (existsSync(candidate)) return candidate;
  const which = spawnSync('sh', ['-c', 'command -v nginx'], { encoding: 'utf8' });
  if (which.status === 0 && which.stdout.trim() !== '') return which.stdout.trim();
  throw new Error('nginx is missing: run bash test/setup.sh (Debian/Ubuntu: apt-get install nginx-light, which has auth_request)');
}

/**
 * The shipped example with its Helm template expressions replaced, as `helm template` would:
 * every `{{ ... }}` must be one of `values` (keyed by the expression's text), or this throws.
 */
export function renderShippedConf(values: Readonly<Record<string, string>>): string {
  const text = readFileSync(SHIPPED_NGINX_CONF, 'utf8');
  return text.replace(/\{\{-?\s*(.*?)\s*-?\}\}/g, (_m, expr: string) => {
    const v = values[expr];
    if (v === undefined) throw new Error(`the shipped nginx config uses {{ ${expr} }}, which the test does not substitute`);
    return v;
  });
}

export { freePort } from './ports.js';

export interface RunningNginx {
  readonly port: number;
  /** The nginx process (one process: master_process off). */
  readonly pid: number | undefined;
  readonly url: string;
  /** nginx's error log so far (for failure messages). */
  errorLog(): Promise<string>;
  close(): Promise<void>;
}

const canConnect = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const s = connect(port, '127.0.0.1', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });

/**
 * Starts nginx in the foreground, one process (no master, so nothing to reap and no user switch),
 * with a private prefix, pid file, logs and temp directories, and `serverConf` (one or more
 * `server` blocks listening on `port`) included in its `http` block. Resolves once the port accepts.
 */
export async function startNginx(serverConf: string, port: number): Promise<RunningNginx> {
  const bin = nginxBinary();
  const dir = await mkdtemp(join(tmpdir(), 'consent-sidecar-nginx-'));
  const temp = (name: string): string => join(dir, name);
  await writeFile(temp('server.conf'), serverConf);
  await writeFile(
    temp('nginx.conf'),
    [
      'daemon off;',
      'master_process off;',
      'worker_processes 1;',
      `pid ${temp('nginx.pid')};`,
      `error_log ${temp('error.log')} warn;`,
      'events { worker_connections 256; }',
      'http {',
      '  access_log off;',
      `  client_body_temp_path ${temp('client_body')};`,
      `  proxy_temp_path ${temp('proxy')};`,
      `  fastcgi_temp_path ${temp('fastcgi')};`,
      `  uwsgi_temp_path ${temp('uwsgi')};`,
      `  scgi_temp_path ${temp('scgi')};`,
      `  include ${temp('server.conf')};`,
      '}',
      '',
    ].join('\n'),
  );
  const errorLog = async (): Promise<string> => (await readFile(temp('error.log'), 'utf8').catch(() => '')) + output;
  let output = '';
  const child: ChildProcess = spawn(bin, ['-p', dir, '-c', temp('nginx.conf'), '-e', temp('error.log')], { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const close = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await Promise.race([exited, sleep(3000).then(() => child.kill('SIGKILL'))]);
      await exited;
    }
    await rm(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 10_000;
  while (!(await canConnect(port))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      const log = await errorLog();
      await close();
      throw new Error(`nginx did not start on 127.0.0.1:${port}:\n${log}`);
    }
    await sleep(20);
  }
  return { port, pid: child.pid, url: `http://127.0.0.1:${port}`, errorLog, close };
}
