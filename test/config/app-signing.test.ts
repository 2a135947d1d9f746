import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadServeConfig, type RawFlags } from '../../src/config/index.js';
import { configProblems } from '../helpers/config.js';

// --app-signing-secret / --app-signing-secret-file: the pod's secret for signed forwards.

const dir = mkdtempSync(join(tmpdir(), 'app-signing-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text: string): string => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};

const A = 'app-signing-secret-a-0123456789abcdef';
const B = 'app-signing-secret-b-0123456789abcdef';
const base = { 'upstream-url': 'https://consent.example/api', 'api-key': 'k-123', 'app-webhook-url': 'http://127.0.0.1:8080/h', 'webhook-secret': ['whsec_a'] };

describe('--app-signing-secret[-file]', () => {
  it('is off by default: forwards are unsigned', () => {
    expect(loadServeConfig(base, {}).appSigning).toBeNull();
  });

  it('reads a file of one secret per line (blank lines and # comments skipped), its variable, and repeated values; the first one signs', () => {
    const path = file('two', `# rotation: the new one first\n${B}\n\n${A}\n`);
    expect(loadServeConfig({ ...base, 'app-signing-secret-file': path }, {}).appSigning?.current()).toEqual([B, A]);
    expect(loadServeConfig(base, { CONSENT_SIDECAR_APP_SIGNING_SECRET_FILE: path }).appSigning?.current()).toEqual([B, A]);
    expect(loadServeConfig({ ...base, 'app-signing-secret': [A, B] }, {}).appSigning?.current()).toEqual([A, B]);
    expect(loadServeConfig({ ...base, 'app-signing-secret-file': path }, {}).appSigning?.origin).toBe('--app-signing-secret-file');
  });

  it.each<[string, RawFlags, string]>([
    ['a secret too short to be a key', { ...base, 'app-signing-secret': ['short'] }, '--app-signing-secret: secret #1 is shorter than 32 characters'],
    ['a second line too short', { ...base, 'app-signing-secret-file': file('short', `${A}\nshort\n`) }, '--app-signing-secret-file: '],
    ['an empty file', { ...base, 'app-signing-secret-file': file('empty', '\n# nothing\n') }, '--app-signing-secret-file: '],
    ['a missing file', { ...base, 'app-signing-secret-file': join(dir, 'nope') }, '--app-signing-secret-file: cannot read'],
    ['a space inside a secret', { ...base, 'app-signing-secret': [`${A} ${B}`] }, '--app-signing-secret: secret #1 holds a space'],
    ['both forms', { ...base, 'app-signing-secret': [A], 'app-signing-secret-file': file('one', A) }, '--app-signing-secret: give the secret as --app-signing-secret or --app-signing-secret-file, not both'],
    ['no webhook ingress to forward from', { 'upstream-url': 'https://consent.example/api', 'api-key': 'k', 'app-signing-secret': [A] }, '--app-signing-secret: nothing is forwarded without --app-webhook-url'],
    ['one of the service\'s own webhook secrets', { ...base, 'webhook-secret': ['whsec_a', `whsec_${A}`], 'app-signing-secret': [`whsec_${A}`] }, '--app-signing-secret: must differ from every --webhook-secret'],
  ])('%s → names the flag', (_name, flags, expected) => {
    const found = configProblems(flags);
    expect(found.some((p) => p.startsWith(expected)), `${JSON.stringify(found)} should contain "${expected}"`).toBe(true);
  });

  it('never puts a secret in a message', () => {
    const found = configProblems({ ...base, 'app-signing-secret': ['short-secret-value'] });
    expect(found.join('\n')).not.toContain('short-secret-value');
  });
});
