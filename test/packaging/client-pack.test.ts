import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../helpers/helm.js';
import { startTestSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { decisionsByUser, startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

// @consent-sidecar/client as a tenant installs it: `npm pack` of packages/client (its prepack builds
// it from src/client), installed into an empty project, adds exactly one package; its ES module and
// its CommonJS file each answer a real sidecar and verify a forward, with their types; and the
// client's hostile-sidecar property test runs, unchanged, against the installed package.

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const PACKAGE = join(ROOT, 'packages/client');
const work = mkdtempSync(join(tmpdir(), 'client-pack-'));
const project = join(work, 'app');
const KEY = 'marketing-email';
const SECRET = 'client-pack-app-signing-secret-0123456789';
let up: ScriptedUpstream;
let sidecar: TestSidecar;
let packed: { filename: string; size: number; unpackedSize: number; files: { path: string }[] };
let installOutput: string;

/** node with `args` in `cwd` (the project by default). Not spawnSync: the sidecar and the service it asks live in this process. */
const runIn = (args: string[], cwd = project, env?: Record<string, string>) => run(process.execPath, args, cwd, env);

const npm = (args: string[], cwd: string): string => {
  const r = spawnSync('npm', args, { cwd, encoding: 'utf8', env: { ...process.env, npm_config_update_notifier: 'false', npm_config_loglevel: 'warn' } });
  if (r.status !== 0) throw new Error(`npm ${args.join(' ')} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
};

/** What each format's script prints: the two checks, and a forward signed here verified (and one altered refused). */
const USE = (load: string): string => `${load}
const { createHmac } = require('node:crypto');
(async () => {
  const client = new ConsentClient({ baseUrl: process.argv[2] });
  const results = [];
  for (const userReference of ['alice', 'bob']) results.push(await client.check({ userReference, configKey: '${KEY}' }));
  await client.close();
  const body = Buffer.from('{"id":"evt_1","type":"consent_action.created","occurredAt":1,"data":{}}');
  const ts = String(Math.floor(Date.now() / 1000));
  const headers = { 'x-consent-sidecar-timestamp': ts, 'x-consent-sidecar-signature': 'v1=' + createHmac('sha256', '${SECRET}').update(ts + '.').update(body).digest('hex') };
  const secrets = signingSecretsFrom('${SECRET}\\n');
  const genuine = verifyForwardedEvent({ headers, rawBody: body, secrets });
  const altered = verifyForwardedEvent({ headers, rawBody: Buffer.from(body.toString().replace('evt_1', 'evt_2')), secrets });
  console.log(JSON.stringify({ results: results.map((r) => [r.allowed, r.kind, holdsAt(r, Date.now())]), genuine: genuine.verified && genuine.event.id, altered: altered.verified ? 'verified' : altered.reason }));
})();
`;

const ESM = USE(`import { createRequire } from 'node:module';
import { ConsentClient, holdsAt, signingSecretsFrom, verifyForwardedEvent } from '@consent-sidecar/client';
const require = createRequire(import.meta.url);`);
const CJS = USE(`const { ConsentClient, holdsAt, signingSecretsFrom, verifyForwardedEvent } = require('@consent-sidecar/client');`);

const TYPES = (load: string): string => `${load}
const client = new ConsentClient({ baseUrl: 'unix:/run/cs/decision.sock', timeoutMs: 500 });
export async function decide(): Promise<[NotAllowedKind | 'allow', number | undefined, boolean]> {
  const r: CheckResult = await client.check({ userReference: 'u', configKey: 'k' });
  return [r.kind, r.allowed ? r.validUntil : undefined, holdsAt(r, Date.now())];
}
export function judge(headers: Record<string, string>, rawBody: Uint8Array): string {
  const v: VerifyForwardedEventResult = verifyForwardedEvent({ headers, rawBody, secrets: ['s'] });
  const reason: ForwardRefusal | undefined = v.verified ? undefined : v.reason;
  return v.verified ? v.event.type : String(reason);
}
`;
const NAMES = 'ConsentClient, holdsAt, verifyForwardedEvent, type CheckResult, type ForwardRefusal, type NotAllowedKind, type VerifyForwardedEventResult';

beforeAll(async () => {
  up = await startUpstream();
  up.reply(decisionsByUser(KEY));
  sidecar = await startTestSidecar(up.url);
  packed = (JSON.parse(npm(['pack', '--pack-destination', work, '--json'], PACKAGE)) as (typeof packed)[])[0]!;
  mkdirSync(project);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'tenant-app', private: true, type: 'module' }));
  // npm's own report, as JSON: its human line is silenced when npm runs under `npm run -s`.
  installOutput = npm(['install', join(work, packed.filename), '--no-audit', '--no-fund', '--prefer-offline', '--json'], project);
}, 600_000);
afterAll(async () => {
  await sidecar?.close();
  await up?.close();
  rmSync(work, { recursive: true, force: true });
});

describe('npm pack of packages/client (@consent-sidecar/client)', () => {
  it('holds the ES module, the CommonJS file and their declarations, its README and manifest; no sources, no tests; declares no dependency', () => {
    const files = packed.files.map((f) => f.path).sort();
    console.info(`npm pack: ${packed.filename}, ${packed.size} bytes packed, ${packed.unpackedSize} unpacked, ${files.length} files`);
    for (const f of ['package.json', 'README.md', 'dist/index.js', 'dist/index.cjs', 'dist/index.d.ts', 'dist/index.d.cts', 'dist/types.d.ts', 'dist/types.d.cts', 'dist/verify-forwarded-event.d.ts']) expect(files, f).toContain(f);
    expect(files.filter((f) => !(f === 'package.json' || f === 'README.md' || /^dist\/[\w-]+\.(js|cjs|d\.ts|d\.cts)$/.test(f)))).toEqual([]);
    const manifest = JSON.parse(readFileSync(join(PACKAGE, 'package.json'), 'utf8')) as Record<string, unknown>;
    expect(manifest.name).toBe('@consent-sidecar/client');
    for (const field of ['dependencies', 'optionalDependencies', 'peerDependencies', 'bundleDependencies', 'devDependencies']) expect(manifest, field).not.toHaveProperty(field);
    // One version for the sidecar and its client.
    expect(manifest.version).toBe((JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version);
  });

  it('installed into an empty project, adds exactly one package', () => {
    expect((JSON.parse(installOutput) as { added: number }).added).toBe(1);
    const top = readdirSync(join(project, 'node_modules')).filter((d) => !d.startsWith('.'));
    expect(top).toEqual(['@consent-sidecar']);
    expect(readdirSync(join(project, 'node_modules/@consent-sidecar'))).toEqual(['client']);
    expect(existsSync(join(project, 'node_modules/@consent-sidecar/client/node_modules'))).toBe(false);
    const tree = JSON.parse(npm(['ls', '--all', '--json'], project)) as { dependencies: Record<string, { dependencies?: object }> };
    expect(Object.keys(tree.dependencies)).toEqual(['@consent-sidecar/client']);
    expect(tree.dependencies['@consent-sidecar/client']!.dependencies ?? {}).toEqual({});
  });

  it.each([
    ['its ES module (import)', 'use.mjs', ESM],
    ['its CommonJS file (require)', 'use.cjs', CJS],
  ])('%s asks a real sidecar and verifies a forward', async (_, file, script) => {
    writeFileSync(join(project, file), script);
    const run = await runIn([file, sidecar.handle.urls.decision]);
    expect(run.stderr).toBe('');
    expect(JSON.parse(run.stdout)).toEqual({
      results: [
        [true, 'allow', true],
        [false, 'deny', false],
      ],
      genuine: 'evt_1',
      altered: 'signature_mismatch',
    });
  });

  it('its types resolve for import and for require (TypeScript, nodenext)', () => {
    writeFileSync(join(project, 'types.mts'), TYPES(`import { ${NAMES} } from '@consent-sidecar/client';`));
    writeFileSync(join(project, 'types.cts'), TYPES(`import { ${NAMES} } from '@consent-sidecar/client';`));
    const tsc = spawnSync(
      process.execPath,
      [join(ROOT, 'node_modules/typescript/bin/tsc'), '--noEmit', '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022', '--types', 'node', '--typeRoots', join(ROOT, 'node_modules/@types'), 'types.mts', 'types.cts'],
      { cwd: project, encoding: 'utf8' },
    );
    expect(tsc.stdout + tsc.stderr).toBe('');
  });

  it("the client's hostile-sidecar property test passes, unchanged, against the installed package", async () => {
    const entry = join(project, 'node_modules/@consent-sidecar/client/dist/index.js');
    const report = join(work, 'hostile.json');
    const run = await runIn([join(ROOT, 'node_modules/vitest/vitest.mjs'), 'run', '--config', 'test/packaging/client-packed.vitest.config.ts', '--reporter=json', `--outputFile=${report}`], ROOT, { CONSENT_CLIENT_PACKED_ENTRY: entry });
    expect(run.code, `${run.stdout}\n${run.stderr}`.slice(-3000)).toBe(0);
    const result = JSON.parse(readFileSync(report, 'utf8')) as { numPassedTests: number; numFailedTests: number; testResults: { name: string }[] };
    expect(result.testResults.map((t) => t.name)).toEqual([join(ROOT, 'test/client/hostile-sidecar.property.test.ts')]);
    expect(result.numFailedTests).toBe(0);
    expect(result.numPassedTests).toBe(5);
  }, 600_000);
});
