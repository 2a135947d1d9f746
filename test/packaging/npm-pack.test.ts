import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allow, CHECK_PATH, deny, startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

// What `npm pack` makes is what a tenant installs: the tarball, installed into an empty project,
// serves with its bin and answers `import { ConsentClient } from 'consent-sidecar/client'` over
// TCP and over a Unix socket, with its types; the OpenAPI document is in it.

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'npm-pack-'));
const project = join(work, 'app');
const KEY = 'marketing-email';
let up: ScriptedUpstream;
const children: ChildProcess[] = [];
let packed: { filename: string; size: number; unpackedSize: number; files: { path: string }[] };

const npm = (args: string[], cwd: string): string => {
  const r = spawnSync('npm', args, { cwd, encoding: 'utf8', env: { ...process.env, npm_config_update_notifier: 'false' } });
  if (r.status !== 0) throw new Error(`npm ${args.join(' ')} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
};

/** Starts the installed package's own bin (`consent-sidecar serve`) and resolves with its decision URL. */
function serve(listen: string): Promise<string> {
  const bin = join(project, 'node_modules/.bin/consent-sidecar');
  const child = spawn(process.execPath, [bin, 'serve', '--upstream-url', up.url, '--api-key', 'k', '--listen', listen, '--admin-listen', '127.0.0.1:0', '--redec-reconcile-interval-ms', '0'], {
    cwd: project,
    env: { PATH: process.env.PATH ?? '' },
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      for (const line of out.split('\n')) {
        if (!line.includes('"event":"started"')) continue;
        resolve((JSON.parse(line) as { urls: { decision: string } }).urls.decision);
      }
    });
    child.once('exit', (code) => reject(new Error(`serve exited ${code} before it started:\n${out}`)));
  });
}

function node(args: string[]): Promise<{ stdout: string; stderr: string }> {
  const child = spawn(process.execPath, args, { cwd: project });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', () => resolve({ stdout, stderr }));
  });
}

const CHECK_SCRIPT = `import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ConsentClient, holdsAt } from 'consent-sidecar/client';
const client = new ConsentClient({ baseUrl: process.argv[2] });
const results = [];
for (const userReference of ['alice', 'bob']) results.push(await client.check({ userReference, configKey: '${KEY}' }));
await client.close();
const openapi = fileURLToPath(import.meta.resolve('consent-sidecar/openapi.yaml'));
console.log(JSON.stringify({ results: results.map((r) => ({ allowed: r.allowed, kind: r.kind, holds: holdsAt(r, Date.now()) })), openapi: existsSync(openapi) }));
`;

const TYPES_SCRIPT = `import { ConsentClient, holdsAt, type CheckResult, type NotAllowedKind } from 'consent-sidecar/client';
const client = new ConsentClient({ baseUrl: 'unix:/run/cs/decision.sock', timeoutMs: 500 });
const r: CheckResult = await client.check({ userReference: 'u', configKey: 'k' });
const kind: NotAllowedKind | 'allow' = r.kind;
const until: number | undefined = r.allowed ? r.validUntil : undefined;
export const used = [kind, until, holdsAt(r, Date.now())];
`;

beforeAll(async () => {
  up = await startUpstream();
  up.reply((req) => {
    if (req.url !== CHECK_PATH) return { status: 404, body: {} };
    const user = (JSON.parse(req.body) as { userReference: string }).userReference;
    return { body: user === 'alice' ? allow(KEY, Date.now() + 3_600_000) : deny(KEY) };
  });
  // dist/ is the build test/global-setup.ts keeps fresh; prepack adds the client's declarations.
  packed = (JSON.parse(npm(['pack', '--pack-destination', work, '--json'], ROOT)) as (typeof packed)[])[0]!;
  mkdirSync(project);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'tenant-app', private: true, type: 'module' }));
  npm(['install', join(work, packed.filename), '--ignore-scripts', '--no-audit', '--no-fund', '--prefer-offline'], project);
}, 600_000);
afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await up?.close();
  rmSync(work, { recursive: true, force: true });
});

describe('npm pack', () => {
  it('holds the CLI, the client with its types, and the OpenAPI document; no tests, no sources', () => {
    const files = packed.files.map((f) => f.path);
    console.info(`npm pack: ${packed.filename}, ${packed.size} bytes packed, ${packed.unpackedSize} unpacked, ${files.length} files`);
    for (const f of ['dist/cli.js', 'dist/client/index.js', 'dist/client/index.d.ts', 'dist/client/types.d.ts', 'dist/lib/duplicate-member.js', 'openapi/consent-sidecar.yaml', 'package.json']) {
      expect(files, f).toContain(f);
    }
    expect(files.filter((f) => f.startsWith('test/') || f.startsWith('src/') || f.endsWith('.ts') && !f.endsWith('.d.ts'))).toEqual([]);
  });

  it.each([
    ['TCP', '127.0.0.1:0'],
    ['a Unix socket', `unix:${join(work, 'decision.sock')}`],
  ])('installed in an empty project: its bin serves, and the client answers over %s', async (_, listen) => {
    const base = await serve(listen);
    writeFileSync(join(project, 'check.mjs'), CHECK_SCRIPT);
    // Not spawnSync: the service answering the sidecar lives in this process.
    const run = await node(['check.mjs', base]);
    expect(run.stderr).toBe('');
    expect(JSON.parse(run.stdout)).toEqual({
      results: [
        { allowed: true, kind: 'allow', holds: true },
        { allowed: false, kind: 'deny', holds: false },
      ],
      openapi: true,
    });
  });

  it('its types resolve through the exports subpath', () => {
    writeFileSync(join(project, 'types.mts'), TYPES_SCRIPT);
    const tsc = spawnSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '--noEmit', '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022', '--types', 'node', '--typeRoots', join(ROOT, 'node_modules/@types'), 'types.mts'], {
      cwd: project,
      encoding: 'utf8',
    });
    expect(tsc.stdout + tsc.stderr).toBe('');
    expect(existsSync(join(project, 'node_modules/consent-sidecar/dist/client/index.d.ts'))).toBe(true);
  });
});
