import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { envName, SERVE_OPTIONS } from '../src/config/index.js';
import { declaredMetricFamilies } from './helpers/metric-families.js';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

describe('README tells the truth', () => {
  it('documents every serve flag and its variable', () => {
    for (const o of SERVE_OPTIONS) {
      expect(readme, `--${o.name}`).toContain(`--${o.name}`);
      expect(readme, envName(o.name)).toContain(envName(o.name));
    }
  });

  it('documents every metric family the sidecar registers', async () => {
    const families = await declaredMetricFamilies();
    expect(families.size).toBeGreaterThan(20);
    for (const name of families) expect(readme, name).toContain(`\`${name}\``);
  });

  it('has the install-and-run and the test commands, and CI runs the test command', () => {
    expect(readme).toContain('npm ci && npm run build && node dist/cli.js demo');
    expect(readme).toContain('```sh\nbash test/setup.sh && npm ci && npm run test:lines\n```');
    expect(readFileSync(new URL('../.ci/run', import.meta.url), 'utf8')).toMatch(/^bash test\/setup\.sh && npm ci && npm run test:lines$/m);
  });

  it('the Layout section lists every folder of src/ (a new capability is documented where it lives)', () => {
    const layout = /## Layout\n+```\n([\s\S]*?)```/.exec(readme)?.[1] ?? '';
    expect(layout).not.toBe('');
    const folders = readdirSync(new URL('../src/', import.meta.url), { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name);
    expect(folders.length).toBeGreaterThan(5);
    expect(folders.filter((f) => !new RegExp(`^src/${f}/\\s`, 'm').test(layout))).toEqual([]);
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
    expect(readme).not.toMatch(/\b[A-Z]+_SECTION\b|\bFLAGS_TABLE\b|\bWEBHOOK_METRICS\b/);
  });
});
