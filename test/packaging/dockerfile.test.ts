import { readFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { validate, ValidationSeverity, type ValidatorSettings } from 'dockerfile-utils';
import { beforeAll, describe, expect, it } from 'vitest';
import { docText } from '../helpers/docs.js';
import { ROOT } from '../helpers/helm.js';

interface Instruction {
  readonly keyword: string;
  readonly args: string;
  readonly line: number;
}

/** Instructions of a Dockerfile: comments dropped, `\` continuations joined. */
function instructions(text: string): Instruction[] {
  const out: Instruction[] = [];
  let pending = '';
  let start = 0;
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (pending === '' && (line === '' || line.startsWith('#'))) return;
    if (pending !== '' && line.startsWith('#')) return;
    if (pending === '') start = i + 1;
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1)} `;
      return;
    }
    const full = pending + line;
    pending = '';
    const match = /^(\S+)\s*(.*)$/.exec(full);
    if (match) out.push({ keyword: match[1]!.toUpperCase(), args: match[2]!, line: start });
  });
  return out;
}

/** Every optional check of dockerfile-utils raised to an error. */
const STRICT: ValidatorSettings = {
  deprecatedMaintainer: ValidationSeverity.ERROR,
  directiveCasing: ValidationSeverity.ERROR,
  emptyContinuationLine: ValidationSeverity.ERROR,
  instructionCasing: ValidationSeverity.ERROR,
  instructionCmdMultiple: ValidationSeverity.ERROR,
  instructionEntrypointMultiple: ValidationSeverity.ERROR,
  instructionHealthcheckMultiple: ValidationSeverity.ERROR,
  instructionJSONInSingleQuotes: ValidationSeverity.ERROR,
  instructionWorkdirRelative: ValidationSeverity.ERROR,
};

let text: string;
let all: Instruction[];
/** Instructions of the last stage (the image that ships). */
let runtime: Instruction[];

beforeAll(async () => {
  text = await readFile(join(ROOT, 'Dockerfile'), 'utf8');
  all = instructions(text);
  const lastFrom = all.map((x) => x.keyword).lastIndexOf('FROM');
  runtime = all.slice(lastFrom);
});

describe('Dockerfile', () => {
  it('lints clean with dockerfile-utils, every check as an error', () => {
    const problems = validate(text, STRICT).map((d) => `line ${d.range.start.line + 1}: ${d.message}`);
    expect(problems).toEqual([]);
  });

  it('the lint does catch problems (a relative WORKDIR, two CMDs)', () => {
    const bad = `${text}\nWORKDIR app\nCMD ["serve"]\n`;
    expect(validate(bad, STRICT).length).toBeGreaterThanOrEqual(2);
  });

  it('is multi-stage: npm ci and the TypeScript build in a build stage; the runtime takes the bundle and no node_modules', () => {
    const froms = all.filter((x) => x.keyword === 'FROM');
    expect(froms.length).toBeGreaterThanOrEqual(2);
    const runs = all.filter((x) => x.keyword === 'RUN').map((x) => x.args);
    expect(runs).toContainEqual(expect.stringMatching(/^npm ci\b(?!.*--omit=dev)/));
    expect(runs).toContainEqual(expect.stringMatching(/^npm run build\b/));
    // The runtime stage runs nothing (there is no shell) and takes what runs from the build stage:
    // dist/cli.js and the bundle it imports (every production dependency inside,
    // test/e2e/footprint-imports.test.ts), never node_modules (56.6 MB of the image before).
    expect(runtime.filter((x) => x.keyword === 'RUN')).toEqual([]);
    const copies = runtime.filter((x) => x.keyword === 'COPY').map((x) => x.args);
    const stageOf = (name: string): string | undefined =>
      froms.find((f) => new RegExp(`\\bAS\\s+${name}$`, 'i').test(f.args))?.args;
    expect(copies.filter((c) => /node_modules/.test(c))).toEqual([]);
    const buildStage = /--from=(\S+)\s+\S*dist/.exec(copies.join('\n'))?.[1];
    expect(buildStage && stageOf(buildStage)).toBeTruthy();
    expect(copies.filter((c) => c.startsWith('--from=')).sort()).toEqual(
      [
        `--from=${buildStage} /app/dist/bundle ./dist/bundle`,
        `--from=${buildStage} /app/dist/cli.js ./dist/cli.js`,
        `--from=${buildStage} /app/dist/grpc/proto ./dist/grpc/proto`,
        `--from=${buildStage} /app/sbom.cdx.json ./sbom.cdx.json`,
      ].sort(),
    );
  });

  /** Production dependencies with an install script that does nothing the package needs. */
  const HARMLESS_INSTALL_SCRIPTS = new Set(['node_modules/protobufjs']);

  it('skipping install scripts loses nothing: no production dependency has one, and the build is tsc', async () => {
    const lock = JSON.parse(await readFile(join(ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { dev?: boolean; hasInstallScript?: boolean }>;
    };
    const withScripts = Object.entries(lock.packages)
      .filter(([path, p]) => path !== '' && !p.dev && p.hasInstallScript && !HARMLESS_INSTALL_SCRIPTS.has(path))
      .map(([path]) => path);
    expect(withScripts).toEqual([]);
    // The one let through (protobufjs, under @grpc/grpc-js's proto-loader): its only script is a
    // postinstall that reads package.json files and prints a warning; it writes nothing.
    for (const path of HARMLESS_INSTALL_SCRIPTS.keys()) {
      const dep = JSON.parse(await readFile(join(ROOT, path, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
      expect(Object.keys(dep.scripts).filter((k) => /install/.test(k))).toEqual(['postinstall']);
      expect(dep.scripts.postinstall).toBe('node scripts/postinstall');
      expect(await readFile(join(ROOT, path, 'scripts/postinstall.js'), 'utf8')).not.toMatch(/write(File|Sync)|mkdir|spawn|exec/);
    }
    const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string>; bin: Record<string, string> };
    expect(pkg.scripts.build).toMatch(/^tsc\b/);
    // The ENTRYPOINT runs the package's bin.
    expect(pkg.bin['consent-sidecar']).toBe('dist/cli.js');
  });

  it('runs on a maintained Node LTS distroless base (22 or 24; 20 is end-of-life)', () => {
    // Defaults of the global ARGs (those with a value); stage-local re-declarations have none.
    const args: Record<string, string> = Object.fromEntries(
      all
        .filter((x) => x.keyword === 'ARG' && x.args.includes('='))
        .map((x) => [x.args.slice(0, x.args.indexOf('=')), x.args.slice(x.args.indexOf('=') + 1)]),
    );
    const base = runtime[0]!.args.replace(/\$\{(\w+)\}/g, (_m, name: string) => args[name] ?? '').split(/\s+/)[0]!;
    expect(base).toMatch(/^gcr\.io\/distroless\/nodejs(22|24)-debian1[23]:nonroot$/);
    const builder = all[all.findIndex((x) => x.keyword === 'FROM')]!.args.replace(/\$\{(\w+)\}/g, (_m, n: string) => args[n] ?? '');
    expect(builder).toMatch(/^node:(22|24)[-.]/);
  });

  it('runs as a numeric non-root user', () => {
    const users = runtime.filter((x) => x.keyword === 'USER');
    expect(users).toHaveLength(1);
    const [uid, gid] = users[0]!.args.split(':').map(Number);
    expect(uid).toBeGreaterThan(0);
    expect(gid).toBeGreaterThan(0);
  });

  it('ENTRYPOINT is the CLI in exec form (node with its tiering flags, docs/performance.md, Footprint), CMD is serve', () => {
    const entrypoint = runtime.filter((x) => x.keyword === 'ENTRYPOINT');
    expect(entrypoint).toHaveLength(1);
    expect(JSON.parse(entrypoint[0]!.args)).toEqual(['/nodejs/bin/node', '--no-maglev', '--invocation-count-for-turbofan=10000', '/app/dist/cli.js']);
    const cmd = runtime.filter((x) => x.keyword === 'CMD');
    expect(cmd).toHaveLength(1);
    expect(JSON.parse(cmd[0]!.args)).toEqual(['serve']);
  });

  it('runs node with 1 MiB semi-spaces (docs/performance.md, Footprint) and in production mode', () => {
    const env = runtime.filter((x) => x.keyword === 'ENV').map((x) => x.args);
    expect(env).toContain('NODE_OPTIONS=--max-semi-space-size=1');
    expect(env).toContain('NODE_ENV=production');
  });

  it('ships package.json (it makes dist/*.js ES modules) and exposes the three ports', () => {
    expect(runtime.filter((x) => x.keyword === 'COPY').map((x) => x.args)).toContainEqual(expect.stringMatching(/^package\.json\s/));
    expect(runtime.find((x) => x.keyword === 'EXPOSE')?.args.split(/\s+/)).toEqual(['7700', '7701', '7702']);
  });

  it('carries the OCI labels', () => {
    const labels = runtime.filter((x) => x.keyword === 'LABEL').map((x) => x.args).join(' ');
    for (const key of ['title', 'description', 'licenses', 'version', 'revision', 'created', 'source']) {
      expect(labels).toContain(`org.opencontainers.image.${key}=`);
    }
  });

  it('carries a CycloneDX SBOM made from the lockfile in the build stage (scripts/sbom.mjs) at /app/sbom.cdx.json', () => {
    const build = all.slice(all.findIndex((x) => x.keyword === 'FROM' && /\bAS\s+build$/i.test(x.args)));
    const buildRuns = build.slice(0, build.findIndex((x, i) => i > 0 && x.keyword === 'FROM')).filter((x) => x.keyword === 'RUN').map((x) => x.args);
    expect(buildRuns).toContainEqual('npm run -s sbom -- --output-file sbom.cdx.json');
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts.sbom).toBe('node scripts/sbom.mjs');
    expect(runtime.filter((x) => x.keyword === 'COPY').map((x) => x.args)).toContain('--from=build /app/sbom.cdx.json ./sbom.cdx.json');
    expect(docText('kubernetes.md')).toContain('/app/sbom.cdx.json');
  });

  it('.dockerignore keeps the context to what the build reads', async () => {
    const ignore = (await readFile(join(ROOT, '.dockerignore'), 'utf8')).split('\n').map((l) => l.trim());
    expect(ignore).toContain('*');
    for (const path of ['package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json', 'src/']) {
      expect(ignore).toContain(`!${path}`);
    }
    // Everything the Dockerfile copies from the context is allowed in.
    const copied = all
      .filter((x) => x.keyword === 'COPY' && !x.args.startsWith('--from'))
      .flatMap((x) => x.args.split(/\s+/).slice(0, -1));
    for (const path of copied) {
      expect(ignore.some((l) => l === `!${path}` || l === `!${path}/`), path).toBe(true);
    }
  });
});
