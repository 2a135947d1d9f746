import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { loadServeConfig } from '../../src/config/index.js';
import { parseListenAddress } from '../../src/lib/listen-address.js';
import { silentLogger } from '../../src/observability/index.js';
import { startSidecar, type SidecarHandle } from '../../src/sidecar.js';
import { allow, startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { configProblems } from '../helpers/config.js';

// CONTRACT: `--listen` also takes `unix:/path/to.sock` (a socket the app reaches through a shared emptyDir).

let dir: string | undefined;
let handle: SidecarHandle | undefined;
let upstream: ScriptedUpstream | undefined;
afterEach(async () => {
  await handle?.close();
  await upstream?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = handle = upstream = undefined;
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
    } finally {
      await client.close();
    }
    await handle.close();
    expect(existsSync(sock)).toBe(false);
  });

  it('never replaces a file that is not a socket', async () => {
    dir = mkdtempSync(join(tmpdir(), 'unix-listen-'));
    const file = join(dir, 'not-a-socket');
    writeFileSync(file, 'keep me');
    await expect(startSidecar(loadServeConfig(flags(`unix:${file}`), {}), { logger: silentLogger() })).rejects.toThrow(/--listen unix:.*not-a-socket.*EADDRINUSE/);
    expect(statSync(file).isFile()).toBe(true);
  });
});
