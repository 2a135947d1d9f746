#!/usr/bin/env node
/**
 * npm run deps:check: can each dependency be upgraded to its newest published version? A verdict
 * per dependency, not an investigation.
 *
 *   npm run deps:check                  newest within each dependency's pinned major (what a fix takes)
 *   npm run deps:check -- --major       newest of all, majors included
 *   npm run deps:check -- --no-suite    the guards only (seconds, not minutes)
 *
 * In a scratch copy of this checkout (its files as they are now, in a temporary directory; this one
 * is not touched): npm ci, then every production dependency that has a newer version installed at
 * once (exact), the build, the guards of the internals we reach (docs/design.md, "Library internals
 * we reach": each guard's message names its library's internal), and the whole suite; when the suite
 * fails with several upgrades, its failed files again with each upgrade alone. Prints per
 * dependency: up to date, upgradable, which guard broke, or which tests fail with it alone.
 * Exit 0 when every dependency is up to date or upgradable, 1 otherwise. Runs on the node that runs
 * it (one of the Node lines package.json claims).
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const say = (line) => process.stderr.write(`deps:check: ${line}\n`);

/** The rows of docs/design.md's internals table: library, pinned version, what is reached, guard files. */
export function internalsTable(root = ROOT) {
  const text = readFileSync(join(root, 'docs/design.md'), 'utf8');
  const at = text.indexOf('\n## Library internals we reach');
  if (at < 0) throw new Error('docs/design.md has no "## Library internals we reach" section');
  const section = text.slice(at + 1).split(/\n## /)[0];
  const rows = section.split('\n').filter((l) => /^\|/.test(l)).slice(2);
  return rows.map((l) => {
    const cells = l.split('|').slice(1, -1).map((c) => c.trim());
    if (cells.length !== 5) throw new Error(`docs/design.md internals table: a row has ${cells.length} cells, not 5: ${l}`);
    const [library, pinned, holds, reached, guards] = cells;
    return {
      library: library.replace(/`/g, ''),
      pinned: pinned.replace(/`/g, ''),
      holds,
      reached,
      guards: [...guards.matchAll(/`([^`]+\.test\.ts)`/g)].map((m) => m[1]),
    };
  });
}

function run(cmd, args, cwd, opts = {}) {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', maxBuffer: 256 * 1024 * 1024, env: { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}` }, ...opts });
  return { ok: r.status === 0, out: `${r.stdout ?? ''}${r.stderr ?? ''}` };
}

/** Newest stable version of `name`, within `major` unless `anyMajor`. */
function newest(name, current, anyMajor) {
  const r = run('npm', ['view', name, 'versions', '--json'], ROOT);
  if (!r.ok) throw new Error(`npm view ${name} failed:\n${r.out}`);
  const parse = (v) => v.split('.').map(Number);
  const [major, minor] = parse(current);
  const stable = [].concat(JSON.parse(r.out)).filter((v) => /^\d+\.\d+\.\d+$/.test(v));
  // 0.x: a minor is a major.
  const same = (v) => (major === 0 ? parse(v)[0] === 0 && parse(v)[1] === minor : parse(v)[0] === major);
  const pool = anyMajor ? stable : stable.filter(same);
  return pool.sort((a, b) => { const x = parse(a); const y = parse(b); return x[0] - y[0] || x[1] - y[1] || x[2] - y[2]; }).at(-1) ?? current;
}

/** Failed tests of a vitest JSON report: `file › test: first line of the message`. */
function failures(report) {
  if (!existsSync(report)) return ['(vitest wrote no report: see its output above)'];
  const r = JSON.parse(readFileSync(report, 'utf8'));
  return r.testResults.flatMap((f) => {
    const file = f.name.slice(f.name.indexOf('/test/') + 1);
    const failed = f.assertionResults.filter((a) => a.status === 'failed').map((a) => `${file} › ${a.fullName}: ${(a.failureMessages[0] ?? '').split('\n')[0]}`);
    return failed.length > 0 || f.status !== 'failed' ? failed : [`${file}: ${(f.message ?? '').split('\n')[0]}`];
  });
}

/** `vitest run ARGS` in `dir`, its JSON report to `report`; its own output to our stderr. */
function runVitest(dir, args, report) {
  run(process.execPath, [join(dir, 'node_modules/vitest/vitest.mjs'), 'run', ...args, '--reporter=json', `--outputFile=${report}`], dir, { stdio: ['ignore', 'ignore', 'inherit'] });
}

function main(argv) {
  const anyMajor = argv.includes('--major');
  const suite = !argv.includes('--no-suite');
  const unknown = argv.filter((a) => !['--major', '--no-suite'].includes(a));
  if (unknown.length > 0) {
    say(`unknown arguments: ${unknown.join(' ')} (use --major, --no-suite)`);
    return 2;
  }
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8'));
  const table = internalsTable();
  const deps = Object.keys(pkg.dependencies).map((name) => {
    const current = lock.packages[`node_modules/${name}`].version;
    return { name, current, newest: newest(name, current, anyMajor), rows: table.filter((t) => t.library === name) };
  });
  const upgrades = deps.filter((d) => d.newest !== d.current);

  const work = mkdtempSync(join(tmpdir(), 'deps-check-'));
  const copy = join(work, 'consent-sidecar');
  try {
    say(`scratch copy: ${copy}`);
    const files = run('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], ROOT).out.split('\0').filter(Boolean);
    for (const f of files) {
      if (!existsSync(join(ROOT, f))) continue;
      mkdirSync(dirname(join(copy, f)), { recursive: true });
      cpSync(join(ROOT, f), join(copy, f));
    }
    say('npm ci');
    const ci = run('npm', ['ci', '--ignore-scripts', '--no-audit', '--no-fund', '--prefer-offline'], copy);
    if (!ci.ok) throw new Error(`npm ci failed in the scratch copy:\n${ci.out}`);
    let installed = true;
    let installOut = '';
    if (upgrades.length > 0) {
      say(`npm install ${upgrades.map((d) => `${d.name}@${d.newest}`).join(' ')}`);
      const inst = run('npm', ['install', '--save-exact', '--ignore-scripts', '--no-audit', '--no-fund', ...upgrades.map((d) => `${d.name}@${d.newest}`)], copy);
      installed = inst.ok;
      installOut = inst.out.trim().split('\n').slice(-5).join('\n');
    }
    const build = installed ? run('npm', ['run', '-s', 'build'], copy) : { ok: false, out: '' };
    const guardFiles = [...new Set(table.flatMap((t) => t.guards))];
    let guardFailures = [];
    if (installed && build.ok) {
      say(`the guards: ${guardFiles.join(' ')}`);
      const report = join(work, 'guards.json');
      runVitest(copy, guardFiles, report);
      guardFailures = failures(report);
    }
    let suiteFailures = null;
    /** Per upgraded dependency, the failed files that fail with it alone (when the suite failed with several). */
    const alone = new Map();
    if (suite && installed && build.ok) {
      say('the whole suite');
      const report = join(work, 'suite.json');
      // The internals table is held to package.json's pins: an upgrade moves a pin on purpose here.
      runVitest(copy, ['--exclude', 'test/packaging/internals.test.ts'], report);
      suiteFailures = failures(report);
      const failedFiles = [...new Set(suiteFailures.map((f) => f.split(' ')[0].replace(/:$/, '')))];
      if (failedFiles.length > 0 && upgrades.length > 1) {
        for (const d of upgrades) {
          say(`the failed files with ${d.name}@${d.newest} alone`);
          for (const f of ['package.json', 'package-lock.json']) cpSync(join(ROOT, f), join(copy, f));
          const one = run('npm', ['ci', '--ignore-scripts', '--no-audit', '--no-fund', '--prefer-offline'], copy).ok
            && run('npm', ['install', '--save-exact', '--ignore-scripts', '--no-audit', '--no-fund', `${d.name}@${d.newest}`], copy).ok
            && run('npm', ['run', '-s', 'build'], copy).ok;
          const r = join(work, `alone-${upgrades.indexOf(d)}.json`);
          if (one) runVitest(copy, failedFiles, r);
          alone.set(d.name, one ? failures(r) : ['(could not install or build it alone)']);
        }
      }
    }

    const lines = [`deps:check (${anyMajor ? 'newest of all, majors included' : 'newest within each pinned major'}; Node ${process.versions.node}):`];
    let ok = installed && build.ok;
    const width = Math.max(...deps.map((d) => d.name.length));
    const toWidth = Math.max(...deps.map((d) => `${d.current} -> ${d.newest}`.length));
    for (const d of deps) {
      const to = d.newest === d.current ? d.current : `${d.current} -> ${d.newest}`;
      let verdict;
      if (d.newest === d.current) verdict = 'up to date';
      else if (!installed) verdict = 'not installable with the others (npm install failed)';
      else if (!build.ok) verdict = 'the build failed (below)';
      else {
        // A guard's message names its library's internal (docs/design.md): that is how a failure is its.
        const broke = guardFailures.filter((f) => f.includes(`${d.name} internal`) || f.includes(`${d.name} experimental API`) || f.includes(`› ${d.name} `));
        if (broke.length > 0) verdict = `guard broke: ${broke.join('; ')}`;
        else if (suiteFailures === null) verdict = d.rows.length > 0 ? 'upgradable by its guards (suite not run: --no-suite)' : 'no internal reached (suite not run: --no-suite)';
        else if (suiteFailures.length === 0) verdict = 'upgradable';
        else if (upgrades.length === 1) verdict = `the suite failed: ${suiteFailures.join('; ')}`;
        else if (alone.get(d.name).length > 0) verdict = `the suite fails with it alone: ${alone.get(d.name).join('; ')}`;
        else verdict = 'upgradable alone (the failures below need another upgrade, or the machine)';
      }
      if (!/^(up to date|upgradable|no internal)/.test(verdict)) ok = false;
      lines.push(`  ${d.name.padEnd(width)}  ${to.padEnd(toWidth)}  ${d.rows.length > 0 ? 'internals' : '         '}  ${verdict}`);
    }
    const foreign = guardFailures.filter((f) => !deps.some((d) => f.includes(`${d.name} internal`) || f.includes(`${d.name} experimental API`) || f.includes(`› ${d.name} `)));
    if (foreign.length > 0) lines.push(`  guards that failed naming no upgraded dependency (node, or a dependency of one): ${foreign.join('; ')}`);
    if (!installed) lines.push(`  npm install:\n${installOut}`);
    if (installed && !build.ok) lines.push(`  npm run build:\n${build.out.trim().split('\n').slice(-10).join('\n')}`);
    if (suiteFailures && suiteFailures.length > 0) {
      ok = false;
      lines.push(`  the suite with every upgrade (test/packaging/internals.test.ts left out: it holds the pins): ${suiteFailures.length} failed:\n    ${suiteFailures.slice(0, 20).join('\n    ')}`);
    }
    if (suiteFailures && suiteFailures.length === 0) lines.push('  the suite with every upgrade: passed');
    process.stdout.write(`${lines.join('\n')}\n`);
    return ok ? 0 : 1;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    process.exitCode = main(process.argv.slice(2));
  } catch (err) {
    say(err.message);
    process.exitCode = 1;
  }
}
