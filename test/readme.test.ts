import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { envName, OTEL_VARIABLES, SERVE_OPTIONS } from '../src/config/index.js';
import { allDocs, anchorOf, anchorsOf, docPages, docText, readmeText } from './helpers/docs.js';
import { declaredMetricFamilies } from './helpers/metric-families.js';

const readme = readmeText();

describe('README and docs/ tell the truth', () => {
  it('documents every serve flag and its variable in the configuration reference', () => {
    const reference = docText('configuration.md');
    for (const o of SERVE_OPTIONS) {
      expect(reference, `--${o.name}`).toContain(`--${o.name}`);
      expect(reference, envName(o.name)).toContain(envName(o.name));
    }
  });

  it('documents every metric family the sidecar registers, each in the metrics reference', async () => {
    const families = await declaredMetricFamilies();
    expect(families.size).toBeGreaterThan(20);
    const reference = docText('operations.md');
    for (const name of families) expect(reference, name).toContain(`\`${name}\``);
  });

  it('has the install-and-run and the test commands, and CI runs the test command', () => {
    expect(readme).toContain('npm ci && npm run build && node dist/cli.js demo');
    expect(readme).toContain('```sh\nbash test/setup.sh && npm ci && npm run test:lines\n```');
    expect(readFileSync(new URL('../.ci/run', import.meta.url), 'utf8')).toMatch(/^bash test\/setup\.sh && npm ci && npm run test:lines$/m);
  });

  it('the Layout section lists every folder of src/ (a new capability is documented where it lives)', () => {
    const layout = /## Layout\n+```\n([\s\S]*?)```/.exec(docText('design.md'))?.[1] ?? '';
    expect(layout).not.toBe('');
    const folders = readdirSync(new URL('../src/', import.meta.url), { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name);
    expect(folders.length).toBeGreaterThan(5);
    expect(folders.filter((f) => !new RegExp(`^src/${f}/\\s`, 'm').test(layout))).toEqual([]);
  });

  it('names every Debian package test/setup.sh installs, and none it does not', () => {
    const script = readFileSync(new URL('setup.sh', import.meta.url), 'utf8');
    const wanted = new Set([...(/declare -a WANT=\(([\s\S]*?)\n\)/.exec(script)?.[1] ?? '').matchAll(/"[^"]*:([a-z0-9.+-]+)"/g)].map((m) => m[1]!));
    expect(wanted.size).toBeGreaterThanOrEqual(10);
    // The README's list: the backticked names after "the Debian packages", what is in parentheses aside.
    const list = /`test\/setup\.sh` installs[\s\S]*?the Debian packages ([\s\S]*?)\.\n/.exec(readme)?.[1] ?? '';
    const named = new Set([...list.replace(/\([^)]*\)/g, '').matchAll(/`([a-z0-9.+-]+)`/g)].map((m) => m[1]!));
    expect([...named].sort()).toEqual([...wanted].sort());
  });

  it('states the Node.js lines that package.json engines claims, and no other', () => {
    const engines = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { engines: { node: string } }).engines.node;
    const majors = [...engines.matchAll(/\^(\d+)\.\d+\.\d+/g)].map((m) => m[1]);
    expect(majors.length, `engines.node "${engines}"`).toBeGreaterThan(0);
    expect(readme).toContain(`Node.js ${majors.join(' or ')} (\`engines\` in package.json: \`${engines}\``);
    // No other minimum is stated anywhere.
    expect(readme).not.toMatch(/Node(?:\.js)? ≥ [\d.]+/);
  });

  it('has no unfilled placeholders', () => {
    expect(allDocs()).not.toMatch(/\b[A-Z]+_SECTION\b|\bFLAGS_TABLE\b|\bWEBHOOK_METRICS\b/);
  });

  it('the README is a front door: under 350 lines, with a table of contents whose links resolve to its headings', () => {
    expect(readme.split('\n').length).toBeLessThan(350);
    const toc = /## Contents\n+([\s\S]*?)\n## /.exec(readme)?.[1] ?? '';
    const links = [...toc.matchAll(/\]\(#([^)]+)\)/g)].map((m) => m[1]!);
    expect(links.length).toBeGreaterThanOrEqual(8);
    const anchors = anchorsOf(readme);
    expect(links.filter((l) => !anchors.has(l))).toEqual([]);
    // and every ## heading is in it
    const level2 = readme.split('\n').filter((l) => l.startsWith('## ') && l !== '## Contents').map((l) => anchorOf(l.slice(3)));
    expect(level2.filter((a) => !links.includes(a))).toEqual([]);
  });

  it('every relative link in the README and docs/ reaches a file, and its #anchor a heading of that file', () => {
    const files = new Map<string, string>([['README.md', readme], ...[...docPages()].map(([f, t]) => [`docs/${f}`, t] as const)]);
    expect(files.size).toBeGreaterThanOrEqual(10);
    const broken: string[] = [];
    let checked = 0;
    for (const [from, text] of files) {
      const dir = from.includes('/') ? 'docs/' : '';
      for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1]!;
        if (/^[a-z]+:/.test(target)) continue;
        const [path, anchor] = target.split('#') as [string, string | undefined];
        const resolved = path === '' ? from : new URL(path, `file:///${dir}`).pathname.slice(1);
        checked++;
        if (!existsSync(new URL(`../${resolved}`, import.meta.url))) broken.push(`${from}: ${target} (no file)`);
        else if (anchor !== undefined && !anchorsOf(files.get(resolved) ?? readFileSync(new URL(`../${resolved}`, import.meta.url), 'utf8')).has(anchor)) broken.push(`${from}: ${target} (no heading)`);
      }
    }
    expect(checked).toBeGreaterThan(30);
    expect(broken).toEqual([]);
  });

  it('every page of docs/ is linked from the docs index and the README', () => {
    const index = docText('README.md');
    for (const page of docPages().keys()) {
      if (page === 'README.md') continue;
      expect(index, page).toContain(`](${page})`);
      expect(readme, page).toContain(`](docs/${page}`);
    }
  });

  it('documents every OpenTelemetry variable serve follows, in docs/tracing.md and the configuration reference, and the chart\'s tracing values', () => {
    const page = docText('tracing.md');
    const reference = docText('configuration.md');
    expect(OTEL_VARIABLES.length).toBeGreaterThanOrEqual(10);
    for (const v of OTEL_VARIABLES) expect(page, v).toContain(`\`${v}\``);
    for (const v of OTEL_VARIABLES) expect(reference, v).toContain(`\`${v}\``);
    for (const key of ['endpoint', 'sampler', 'samplerArg', 'serviceName', 'resourceAttributes']) expect(page, key).toContain(`${key}:`);
  });

  it('one command form: node dist/cli.js (or the image path), never a bare consent-sidecar command', () => {
    const bare = allDocs()
      .split('\n')
      .filter((l) => /(^|\$ |`)consent-sidecar (serve|demo|simulate|check|redec|webhook)\b/.test(l.trim()));
    expect(bare).toEqual([]);
  });
});
