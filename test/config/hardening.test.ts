import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { fileSecret, loadServeConfig, parseRequiredHeader, watchSecrets, type SecretEvent } from '../../src/config/index.js';
import { createRegistry } from '../../src/observability/index.js';
import { formatTable } from '../../src/redec/index.js';
import { formatDeadLetters } from '../../src/cli/dead-letters.js';
import { configProblems } from '../helpers/config.js';
import { capturingLogger } from '../helpers/sidecar.js';
import { PATIENTLY } from '../helpers/wait.js';

/** Edges of the configuration found by an attack session: secrets never echoed, unsafe values refused. */
const base = { 'upstream-url': 'https://consent.example/api', 'api-key': 'k-123' };
const webhooks = { ...base, 'app-webhook-url': 'http://127.0.0.1:8080/hooks', 'webhook-secret': 'whsec_abcdefghijklmnop' };
const dir = (): string => mkdtempSync(join(tmpdir(), 'cs-hardening-'));

describe('values refused at start, naming the flag', () => {
  it.each(['https://consent.example/api?tenant=a', 'https://consent.example/api#x', 'https://consent.example/api?'])('--upstream-url %s (a query or fragment would land in every URL built from it)', (url) => {
    expect(configProblems({ ...base, 'upstream-url': url }).join('\n')).toMatch(/^--upstream-url: must not carry a query or fragment/m);
  });

  it('--webhook-dedup-retention-ms under twice the tolerance (a replay inside the window would be delivered twice)', () => {
    expect(configProblems({ ...webhooks, 'webhook-dedup-retention-ms': '500000', 'webhook-tolerance-s': '300' }).join('\n')).toMatch(/--webhook-dedup-retention-ms: must be at least twice --webhook-tolerance-s \(600000 ms\)/);
    expect(configProblems({ ...webhooks, 'webhook-dedup-retention-ms': '600000', 'webhook-tolerance-s': '300' })).toEqual([]);
  });

  it('--decision-log at a symbolic link is not followed', () => {
    const d = dir();
    writeFileSync(join(d, 'elsewhere'), '');
    symlinkSync(join(d, 'elsewhere'), join(d, 'decisions.jsonl'));
    expect(configProblems({ ...base, 'decision-log': join(d, 'decisions.jsonl') }).join('\n')).toMatch(/--decision-log: a symbolic link is there; it is not followed/);
    expect(configProblems({ ...base, 'decision-log': join(d, 'other.jsonl') })).toEqual([]);
  });

  it('a secret file that is a named pipe is refused (reading it would block, or take what its writer chooses)', () => {
    const d = dir();
    const fifo = join(d, 'api-key');
    execFileSync('mkfifo', [fifo]);
    const problems = configProblems({ ...base, 'api-key': undefined as unknown as string, 'api-key-file': fifo });
    expect(problems.join('\n')).toMatch(/api-key-file.*is not a regular file \(a named pipe\)/);
  });
});

describe('secret text is never echoed', () => {
  it('a required header without its name: the value is not quoted', () => {
    const r = parseRequiredHeader('Bearer s3cr3t-token-value: x');
    expect(r).toEqual({ error: expect.stringContaining('not a valid header name') });
    expect(JSON.stringify(r)).not.toContain('s3cr3t');
  });

  it('a Redis URL without its scheme: neither the user nor the password is quoted', () => {
    const problems = configProblems({ ...base, 'redis-url': 'admin:hunter2-pass@redis.internal:6379' }).join('\n');
    expect(problems).toMatch(/--redis-url/);
    expect(problems).not.toContain('hunter2');
    expect(problems).not.toContain('admin');
  });
});

describe('a secret file that fails to reload', () => {
  it('is said once per change of the file, not at every poll; a good file again is a reload', async () => {
    const d = dir();
    const path = join(d, 'api-key');
    writeFileSync(path, 'key-one');
    const secret = fileSecret(path, '--api-key-file', (t) => (t.trim() === '' ? { error: 'the API key is empty' } : { value: t.trim() }));
    if (typeof secret === 'string') throw new Error(secret);
    const events: SecretEvent[] = [];
    secret.watch(20, (e) => events.push(e));
    writeFileSync(path, '  ');
    await vi.waitFor(() => expect(events).toHaveLength(1), PATIENTLY);
    // A second file polled at the same interval, changed five times and reloaded each time: the
    // first one was polled all along, and its bad text is still one event.
    const other = join(d, 'other');
    writeFileSync(other, 'v0');
    const clock = fileSecret(other, '--other-file', (t) => ({ value: t }));
    if (typeof clock === 'string') throw new Error(clock);
    let reloads = 0;
    clock.watch(20, () => reloads++);
    for (let i = 1; i <= 5; i++) {
      // Written whole, then moved in place: a poll between writeFileSync's truncation and its
      // write read the empty file, a change of its own (a fourth reload for three writes, once in CI).
      writeFileSync(`${other}.next`, `v${i}`);
      renameSync(`${other}.next`, other);
      await vi.waitFor(() => expect(reloads).toBe(i), PATIENTLY);
    }
    clock.close();
    expect(events).toHaveLength(1);
    writeFileSync(path, '\t');
    await vi.waitFor(() => expect(events.map((e) => e.kind)).toEqual(['reload_failed', 'reload_failed']), PATIENTLY);
    writeFileSync(path, 'key-two');
    await vi.waitFor(() => expect(events.map((e) => e.kind)).toEqual(['reload_failed', 'reload_failed', 'reloaded']), PATIENTLY);
    expect(secret.current()).toBe('key-two');
    secret.close();
  });

  it('a world-readable secret file is warned about at start (not a Kubernetes Secret volume)', () => {
    const d = dir();
    const path = join(d, 'api-key');
    writeFileSync(path, 'key-one');
    chmodSync(path, 0o644);
    const config = loadServeConfig({ ...base, 'api-key': undefined as unknown as string, 'api-key-file': path }, {});
    const { logger, lines } = capturingLogger('info');
    const watch = watchSecrets([config.upstream.apiKey], { intervalMs: 60_000, logger, registry: createRegistry(), now: Date.now });
    watch.close();
    expect(lines().filter((l) => l.event === 'secret_file_world_readable')).toHaveLength(1);
    expect(JSON.stringify(lines())).not.toContain('key-one');
    // The same file in a Kubernetes Secret volume (its ..data beside it): not said.
    const k8s = dir();
    mkdirSync(join(k8s, '..data'));
    writeFileSync(join(k8s, 'api-key'), 'key-one');
    chmodSync(join(k8s, 'api-key'), 0o644);
    const c2 = loadServeConfig({ ...base, 'api-key': undefined as unknown as string, 'api-key-file': join(k8s, 'api-key') }, {});
    const second = capturingLogger('info');
    watchSecrets([c2.upstream.apiKey], { intervalMs: 60_000, logger: second.logger, registry: createRegistry(), now: Date.now }).close();
    expect(second.lines().filter((l) => l.event === 'secret_file_world_readable')).toEqual([]);
  });
});

describe('tables print values from outside as one line each', () => {
  it('dead letters and REDEC obligations escape control characters', () => {
    const evil = 'evt\u001b[2J\u001b[31mred\nnext\u202eline\\';
    const letters = formatDeadLetters([{ id: evil, type: 'a\rb', attempts: 1, lastError: 'x\u0007', acceptedAt: 0 } as never], 60_000);
    expect(letters.split('\n')).toHaveLength(2);
    for (const line of letters.split('\n')) expect(line).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202e]/u);
    expect(letters).toContain('evt\\x1b[2J\\x1b[31mred\\x0anext\\u202eline\\\\');
    const table = formatTable([{ notificationRequirementId: evil, status: 'pending' }]);
    expect(table.split('\n')).toHaveLength(2);
    for (const line of table.split('\n')) expect(line).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202e]/u);
  });
});
