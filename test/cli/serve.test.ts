import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { cliEntry } from '../helpers/cli.js';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/ports.js';
import { buildProgram } from '../../src/cli/program.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

interface Run {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exit: Promise<number | null>;
}

function cli(args: string[], env: Record<string, string> = {}): Run {
  const child = spawn(process.execPath, [...cliEntry(), ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', ...env },
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  return { child, stdout: () => out, stderr: () => err, exit: new Promise((r) => child.on('exit', (code) => r(code))) };
}

const running: ChildProcess[] = [];
const servers: Server[] = [];
afterEach(async () => {
  for (const c of running.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

describe('consent-sidecar serve', () => {
  it('reports every configuration problem at once, naming the flags, exit 2, no stack trace', async () => {
    const run = cli(['serve', '--upstream-timeout-ms', 'soon', '--listen', 'nowhere'], { CONSENT_SIDECAR_CACHE_MAX_ENTRIES: 'lots' });
    expect(await run.exit).toBe(2);
    const err = run.stderr();
    expect(err).toContain('--upstream-url: is required');
    expect(err).toContain('--api-key: one of --api-key or --api-key-file is required');
    expect(err).toContain('--upstream-timeout-ms: must be an integer');
    expect(err).toContain('--listen: expected host:port');
    expect(err).toContain('--cache-max-entries (from CONSENT_SIDECAR_CACHE_MAX_ENTRIES)');
    expect(err).not.toMatch(/\n\s+at /);
  });

  it.each([
    ['/notanumber', '--redis-url'],
    ['redis://localhost/notanumber', '--redis-url'],
    ['redis://localhost:6379/1.5', '--redis-url'],
    ['redis://:%zz@localhost:6379', '--redis-url'],
    ['redis:///0', '--redis-url'],
  ])('a bad --redis-url %s exits 2 naming the flag, never repeating the URL (issue 20)', async (url, flag) => {
    const run = cli(['serve', '--upstream-url', 'http://127.0.0.1:9', '--api-key', 'k', '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0', '--redis-url', url]);
    running.push(run.child);
    expect(await run.exit).toBe(2);
    expect(run.stderr()).toContain(`${flag}:`);
    expect(run.stderr()).not.toContain(url);
    expect(run.stderr()).not.toMatch(/\n\s+at /);
  });

  it('an unknown flag is a usage error (exit 2)', async () => {
    const run = cli(['serve', '--upstream-ur', 'http://x']);
    expect(await run.exit).toBe(2);
    expect(run.stderr()).toContain("unknown option '--upstream-ur'");
  });

  it('a flag that takes one value, given twice, is refused naming it (exit 2): the last one does not silently win', async () => {
    const run = cli(['serve', '--upstream-url', 'http://127.0.0.1:9', '--api-key', 'k', '--listen', '127.0.0.1:7710', '--listen', '127.0.0.1:7711']);
    running.push(run.child);
    expect(await run.exit).toBe(2);
    expect(run.stderr()).toContain('--listen was given twice ("127.0.0.1:7710", then "127.0.0.1:7711")');
    expect(run.stderr()).not.toMatch(/\n\s+at /);
    // Repeatable flags still collect their values.
    const program = buildProgram();
    const serve = program.commands.find((c) => c.name() === 'serve')!;
    serve.action(() => undefined);
    await program.parseAsync(['node', 'cli', 'serve', '--webhook-secret', 'whsec_a', '--webhook-secret', 'whsec_b'], { from: 'node' });
    expect(serve.opts().webhookSecret).toEqual(['whsec_a', 'whsec_b']);
  });

  it("--listen's help says it also takes a Unix socket", () => {
    const serve = buildProgram().commands.find((c) => c.name() === 'serve')!;
    expect(serve.helpInformation().replace(/\s+/g, ' ')).toMatch(/--listen <host:port\|unix:\/path> decision API listener: host:port, or unix:\/absolute\/path\.sock/);
  });

  it('a port in use names the listener flag, exit 1, no stack trace', async () => {
    const busy = createServer();
    servers.push(busy);
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
    const port = (busy.address() as AddressInfo).port;
    const run = cli(['serve', '--upstream-url', 'http://127.0.0.1:9', '--api-key', 'k', '--listen', `127.0.0.1:${port}`, '--admin-listen', '127.0.0.1:0']);
    running.push(run.child);
    expect(await run.exit).toBe(1);
    expect(run.stderr()).toContain(`--listen 127.0.0.1:${port}: cannot listen (EADDRINUSE)`);
    expect(run.stderr()).not.toMatch(/\n\s+at /);
  });

  it('on SIGTERM stops accepting, finishes the check in flight, and exits 0', async () => {
    let release: () => void = () => undefined;
    let asked = false;
    const upstream = createServer((req, res) => {
      req.resume();
      asked = true;
      release = () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ decision: 'DENY', configKey: 'k' }));
      };
    });
    servers.push(upstream);
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const [port, admin] = [await freePort(), await freePort()];
    const run = cli([
      'serve',
      '--upstream-url', `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
      '--api-key', 'k',
      '--upstream-timeout-ms', '10000',
      // The reconciler's listing, or the start-up key check, would be the request this hand-held upstream holds.
      '--redec-reconcile-interval-ms', '0',
      '--api-key-check', 'off',
      '--listen', `127.0.0.1:${port}`,
      '--admin-listen', `127.0.0.1:${admin}`,
    ]);
    running.push(run.child);
    await expect.poll(async () => (await fetch(`http://127.0.0.1:${admin}/readyz`).catch(() => null))?.status, { timeout: 15_000 }).toBe(200);

    const inFlight = fetch(`http://127.0.0.1:${port}/v1/authorization/check`, {
      method: 'POST',
      body: JSON.stringify({ userReference: 'u', configKey: 'k' }),
    });
    await expect.poll(() => asked).toBe(true);
    run.child.kill('SIGTERM');
    // Draining: new connections are refused (a kept-alive one is told `Connection: close`).
    await expect
      .poll(async () => (await fetch(`http://127.0.0.1:${port}/v1/authorization/check`, { method: 'POST', body: '{}' }).then((r) => r.headers.get('connection')).catch(() => 'refused')))
      .toMatch(/^(refused|close)$/);
    release();
    const res = await inFlight;
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ decision: 'DENY', configKey: 'k' });
    expect(await run.exit).toBe(0);
    expect(run.stdout()).toContain('"event":"shutdown"');
    expect(run.stdout()).toContain('"event":"stopped"');
  });
});
