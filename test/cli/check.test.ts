import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/program.js';
import { loadServeConfig } from '../../src/config/index.js';
import { silentLogger } from '../../src/observability/index.js';
import { startSidecar } from '../../src/assembly/sidecar.js';
import { runCli, startCli } from '../helpers/cli.js';
import { refusedPort } from '../helpers/ports.js';
import { allow, deny, startUpstream } from '../helpers/upstream.js';

/** A real service stand-in that answers every check with 401, as the service does for a bad key. */
let unauthorized: Server;
let unauthorizedUrl: string;
/** A port that was just free: nothing listens there. */
let deadPort: number;

beforeAll(async () => {
  unauthorized = createServer((req, res) => {
    req.resume();
    res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"unauthorized"}');
  });
  await new Promise<void>((r) => unauthorized.listen(0, '127.0.0.1', r));
  unauthorizedUrl = `http://127.0.0.1:${(unauthorized.address() as AddressInfo).port}`;
  deadPort = await refusedPort();
});

afterAll(async () => {
  await new Promise<void>((r) => unauthorized.close(() => r()));
});

const who = ['--user-reference', 'alice', '--config-key', 'marketing-email'];

describe('check', () => {
  it('--via with nothing listening says the sidecar could not be reached, prints no answer, exits 2', async () => {
    const r = await runCli(['check', ...who, '--via', `http://127.0.0.1:${deadPort}`]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/could not reach the sidecar at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)/);
    expect(r.stderr).not.toContain('internal_error');
  });

  it('--via with upstream flags is a conflict naming them', async () => {
    const r = await runCli(['check', ...who, '--via', 'http://127.0.0.1:7700', '--upstream-url', 'http://x', '--api-key', 'k']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('drop --upstream-url, --api-key');
  });

  it('a 4xx from the service names the status', async () => {
    const r = await runCli(['check', ...who, '--upstream-url', unauthorizedUrl, '--api-key', 'wrong']);
    expect(r.code).toBe(2);
    expect(JSON.parse(r.stdout)).toEqual({ decision: 'DENY', error: 'upstream_4xx' });
    expect(r.stderr).toContain('upstream_4xx: service answered 401');
    expect(r.stderr).toContain('--api-key');
  });
});

describe('check --via unix:/path (the form the chart gives the app with decisionSocket.enabled)', () => {
  it('asks the sidecar on its Unix socket: exit 0 on ALLOW, 1 on DENY; nothing there: exit 2, no answer', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'check-via-unix-'));
    const sock = join(dir, 'decision.sock');
    const upstream = await startUpstream((r) => ((JSON.parse(r.body) as { userReference: string }).userReference === 'alice' ? { body: allow('marketing-email', Date.now() + 60_000) } : { body: deny('marketing-email') }));
    const sidecar = await startSidecar(loadServeConfig({ 'upstream-url': upstream.url, 'api-key': 'k', listen: `unix:${sock}`, 'admin-listen': '127.0.0.1:0', 'redec-reconcile-interval-ms': '0' }, {}), { logger: silentLogger() });
    try {
      const yes = await runCli(['check', ...who, '--via', `unix:${sock}`]);
      expect(yes.code, yes.stderr).toBe(0);
      expect(JSON.parse(yes.stdout)).toMatchObject({ decision: 'ALLOW', configKey: 'marketing-email' });
      expect(yes.stderr).toContain('source upstream');
      const no = await runCli(['check', '--user-reference', 'bob', '--config-key', 'marketing-email', '--via', `unix:${sock}`]);
      expect(no.code, no.stderr).toBe(1);
      expect(JSON.parse(no.stdout)).toEqual({ decision: 'DENY', configKey: 'marketing-email' });
    } finally {
      await sidecar.close();
      await upstream.close();
    }
    const gone = await runCli(['check', ...who, '--via', `unix:${sock}`]);
    expect(gone.code).toBe(2);
    expect(gone.stdout).toBe('');
    expect(gone.stderr).toContain(`could not reach the sidecar at unix:${sock} (ENOENT)`);
    rmSync(dir, { recursive: true, force: true });
    const relative = await runCli(['check', ...who, '--via', 'unix:decision.sock']);
    expect(relative.code).toBe(2);
    expect(relative.stderr).toContain('--via: expected unix:/absolute/path/to.sock');
  });
});

describe('CLI usage errors and help', () => {
  it('every command\'s help wraps at 80 columns like the others (serve\'s too); only an unbreakable word may run past', () => {
    const all = (c: Command): Command[] => [c, ...c.commands.flatMap(all)];
    const long: string[] = [];
    for (const cmd of all(buildProgram())) {
      for (const line of cmd.helpInformation().split('\n')) {
        if (line.length > 80 && line.trim().includes(' ')) long.push(`${cmd.name()}: ${line}`);
      }
    }
    expect(long).toEqual([]);
  });

  it('an unknown flag prints a short error with the suggestion, not the whole help', async () => {
    const r = await runCli(['check', ...who, '--upstream-ur', 'http://x']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("unknown option '--upstream-ur'");
    expect(r.stderr).toContain('Did you mean --upstream-url?');
    expect(r.stderr).not.toContain('Options:');
    expect(r.stderr.split('\n').filter(Boolean).length).toBeLessThanOrEqual(3);
  });

  it('a misspelt CONSENT_SIDECAR_* variable is named with the likely one', async () => {
    const r = await runCli(['check', ...who, '--upstream-url', unauthorizedUrl], { CONSENT_SIDECAR_API_KYE: 'k', CONSENT_SIDECAR_NO_SUCH_THING_AT_ALL: 'x' });
    expect(r.stderr).toContain('CONSENT_SIDECAR_API_KYE is not a consent-sidecar variable and is ignored (did you mean CONSENT_SIDECAR_API_KEY?)');
    expect(r.stderr).toContain('CONSENT_SIDECAR_NO_SUCH_THING_AT_ALL is not a consent-sidecar variable and is ignored\n');
    // The value is never printed.
    expect(r.stderr).not.toMatch(/=k\b/);
  });

  it('serve warns about a misspelt variable in its logs', async () => {
    const run = await startCli(
      ['serve', '--upstream-url', 'http://127.0.0.1:1', '--api-key', 'k', '--listen', '127.0.0.1:0', '--webhook-listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0'],
      /"event":"unknown_variable"/,
      { CONSENT_SIDECAR_CACHE_MAX_TTL: '5' },
    );
    try {
      expect(run.line).toContain('CONSENT_SIDECAR_CACHE_MAX_TTL is not a consent-sidecar variable and is ignored (did you mean CONSENT_SIDECAR_CACHE_MAX_TTL_MS?)');
    } finally {
      run.child.kill('SIGTERM');
      await run.exited;
    }
  });

  it('per-command help says what the upstream flags mean for that command', async () => {
    const redec = await runCli(['redec', 'pending', '--help']);
    expect(redec.stdout).toContain('deadline of each page request');
    expect(redec.stdout).not.toContain('whole deadline of one check');
    expect(redec.stdout).toContain('(read once)');
    const check = await runCli(['check', '--help']);
    expect(check.stdout).toContain('deadline of this check');
    expect(check.stdout).toContain('(read once)');
    const serve = await runCli(['serve', '--help']);
    expect(serve.stdout).toContain('re-read when it changes');
  });
});
