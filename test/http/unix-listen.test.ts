import { spawn } from 'node:child_process';
import { chmodSync, existsSync, lstatSync, mkdirSync, mkdtempSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { loadServeConfig } from '../../src/config/index.js';
import { listenAt } from '../../src/http/listen.js';
import { parseListenAddress } from '../../src/lib/listen-address.js';
import { silentLogger } from '../../src/observability/index.js';
import { startSidecar, type SidecarHandle } from '../../src/assembly/sidecar.js';
import { allow, startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { configProblems } from '../helpers/config.js';

// CONTRACT: `--listen` also takes `unix:/path/to.sock` (a socket the app reaches through a shared emptyDir).

let dir: string | undefined;
let handle: SidecarHandle | undefined;
let upstream: ScriptedUpstream | undefined;
let bare: Server | undefined;
afterEach(async () => {
  await handle?.close();
  await upstream?.close();
  if (bare?.listening) await new Promise((r) => bare!.close(r));
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = handle = upstream = bare = undefined;
});

const flags = (listen: string, upstreamUrl = 'http://127.0.0.1:9') => ({ 'upstream-url': upstreamUrl, 'api-key': 'k', listen, 'admin-listen': '127.0.0.1:0', 'shutdown-timeout-ms': '500' });

const problemsOf = (f: Record<string, string>): string[] => configProblems(f);

describe('--listen unix:/path', () => {
  it('parses an absolute path; refuses a relative or empty one, naming the flag', () => {
    expect(parseListenAddress('unix:/run/cs/decision.sock', { unix: true })).toEqual({ host: 'unix', port: 0, path: '/run/cs/decision.sock' });
    expect(typeof parseListenAddress('unix:/run/x.sock')).toBe('string');
    expect(problemsOf(flags('unix:relative.sock')).join('\n')).toMatch(/--listen.*unix:\/absolute/);
    expect(problemsOf(flags('unix:')).join('\n')).toMatch(/--listen/);
    expect(problemsOf(flags(`unix:/${'x'.repeat(120)}`)).join('\n')).toMatch(/--listen.*107 bytes/);
  });

  it('only the decision API takes a Unix socket', () => {
    expect(problemsOf({ ...flags('127.0.0.1:0'), 'admin-listen': 'unix:/tmp/a.sock' }).join('\n')).toMatch(/--admin-listen/);
  });

  it('answers checks on the socket, replaces a stale socket file, and removes it on close', async () => {
    dir = mkdtempSync(join(tmpdir(), 'unix-listen-'));
    const sock = join(dir, 'decision.sock');
    upstream = await startUpstream({ status: 200, body: allow('k', Date.now() + 60_000) });
    // A socket left by a process killed without a chance to remove it.
    const crashed = spawn(process.execPath, ['-e', `require('net').createServer().listen(${JSON.stringify(sock)}, () => console.log('up'))`], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise((r) => crashed.stdout!.once('data', r));
    crashed.kill('SIGKILL');
    await new Promise((r) => crashed.once('exit', r));
    expect(statSync(sock).isSocket()).toBe(true);
    handle = await startSidecar(loadServeConfig(flags(`unix:${sock}`, upstream.url), {}), { logger: silentLogger() });
    expect(handle.urls.decision).toBe(`unix:${sock}`);
    expect(statSync(sock).mode & 0o777).toBe(0o666);
    const client = new Client('http://localhost', { socketPath: sock });
    try {
      const ask = async () => {
        const res = await client.request({ method: 'POST', path: '/v1/authorization/check', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ userReference: 'u', configKey: 'k' }) });
        return { status: res.statusCode, source: res.headers['x-consent-decision-source'], json: (await res.body.json()) as { decision: string } };
      };
      expect(await ask()).toMatchObject({ status: 200, source: 'upstream', json: { decision: 'ALLOW' } });
      expect(await ask()).toMatchObject({ status: 200, source: 'cache', json: { decision: 'ALLOW' } });
      // No name resolves to a Unix socket: any Host is served on it.
      const named = await client.request({ method: 'POST', path: '/v1/authorization/check', headers: { 'content-type': 'application/json', host: 'app.internal' }, body: JSON.stringify({ userReference: 'u', configKey: 'k' }) });
      expect([named.statusCode, ((await named.body.json()) as { decision: string }).decision]).toEqual([200, 'ALLOW']);
    } finally {
      await client.close();
    }
    await handle.close();
    expect(existsSync(sock)).toBe(false);
  });

  it('refuses a path where a live socket accepts connections, naming the flag, and leaves that socket alone (issue 20)', async () => {
    dir = mkdtempSync(join(tmpdir(), 'unix-listen-'));
    const sock = join(dir, 'decision.sock');
    upstream = await startUpstream({ status: 200, body: allow('k', Date.now() + 60_000) });
    handle = await startSidecar(loadServeConfig(flags(`unix:${sock}`, upstream.url), {}), { logger: silentLogger() });
    const second = startSidecar(loadServeConfig(flags(`unix:${sock}`, upstream.url), {}), { logger: silentLogger() });
    await expect(second).rejects.toThrow(/--listen unix:.*decision\.sock.*live socket/);
    await expect(second).rejects.toMatchObject({ cause: { code: 'ERR_LISTEN_IN_USE' } });
    // The first instance still owns its socket and answers on it.
    const client = new Client('http://localhost', { socketPath: sock });
    try {
      const res = await client.request({ method: 'POST', path: '/v1/authorization/check', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ userReference: 'u', configKey: 'k' }) });
      expect(res.statusCode).toBe(200);
      await res.body.text();
    } finally {
      await client.close();
    }
  });

  it('creates the socket with mode 0666 at bind, and never changes a mode by path afterwards: a symlink swapped in right after bind is left as it is (issue 20)', async () => {
    dir = mkdtempSync(join(tmpdir(), 'unix-listen-'));
    const sock = join(dir, 'decision.sock');
    const secret = join(dir, 'api-key');
    writeFileSync(secret, 'sk_live_x', { mode: 0o600 });
    chmodSync(secret, 0o600);
    bare = createServer((_req, res) => res.end('ok'));
    let modeAtBind: number | undefined;
    // What an attacker with write access to the directory does between bind and a chmod by path:
    // the socket moves away and a symlink to the key file takes its place. 'listening' is emitted
    // right after bind, before listenAt sees the listen complete.
    bare.prependListener('listening', () => {
      modeAtBind = statSync(sock).mode & 0o777;
      renameSync(sock, join(dir!, 'moved.sock'));
      symlinkSync(secret, sock);
    });
    writeFileSync(join(dir, 'before'), '');
    await expect(listenAt(bare, { host: 'unix', port: 0, path: sock })).resolves.toBe(`unix:${sock}`);
    expect(modeAtBind).toBe(0o666);
    // The umask set for the bind is the process's own again: files are created as before.
    writeFileSync(join(dir, 'after'), '');
    expect(statSync(join(dir, 'after')).mode).toBe(statSync(join(dir, 'before')).mode);
    expect(lstatSync(sock).isSymbolicLink()).toBe(true);
    expect(statSync(secret).mode & 0o777).toBe(0o600);
    // The socket itself kept the mode it was created with.
    expect(statSync(join(dir, 'moved.sock')).mode & 0o777).toBe(0o666);
  });

  it('refuses a symlink at the path without following it, whatever it points at (issue 20)', async () => {
    dir = mkdtempSync(join(tmpdir(), 'unix-listen-'));
    const secret = join(dir, 'api-key');
    writeFileSync(secret, 'sk_live_x', { mode: 0o600 });
    chmodSync(secret, 0o600);
    const sock = join(dir, 'decision.sock');
    symlinkSync(secret, sock);
    await expect(startSidecar(loadServeConfig(flags(`unix:${sock}`), {}), { logger: silentLogger() })).rejects.toThrow(/--listen unix:.*decision\.sock.*symbolic link/);
    expect(lstatSync(sock).isSymbolicLink()).toBe(true);
    expect(statSync(secret).mode & 0o777).toBe(0o600);
    expect(statSync(secret).isFile()).toBe(true);
  });

  it('refuses a directory at the path, saying so (issue 20)', async () => {
    dir = mkdtempSync(join(tmpdir(), 'unix-listen-'));
    const sock = join(dir, 'decision.sock');
    mkdirSync(sock);
    const started = startSidecar(loadServeConfig(flags(`unix:${sock}`), {}), { logger: silentLogger() });
    await expect(started).rejects.toThrow(/--listen unix:.*decision\.sock.*a directory is there/);
    await expect(started).rejects.toMatchObject({ cause: { code: 'ERR_LISTEN_NOT_A_SOCKET' } });
    expect(statSync(sock).isDirectory()).toBe(true);
  });

  it('never replaces a file that is not a socket', async () => {
    dir = mkdtempSync(join(tmpdir(), 'unix-listen-'));
    const file = join(dir, 'not-a-socket');
    writeFileSync(file, 'keep me');
    const started = startSidecar(loadServeConfig(flags(`unix:${file}`), {}), { logger: silentLogger() });
    await expect(started).rejects.toThrow(/--listen unix:.*not-a-socket.*EADDRINUSE/);
    // Issue 20: and says what is there.
    await expect(started).rejects.toThrow(/--listen unix:.*not-a-socket.*a regular file is there/);
    expect(statSync(file).isFile()).toBe(true);
  });
});
