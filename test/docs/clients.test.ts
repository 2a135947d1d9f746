import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HostileSidecar, response } from '../helpers/hostile-sidecar.js';
import { docText } from '../helpers/docs.js';
import { refusedPort } from '../helpers/ports.js';
import { PATIENCE_MS } from '../helpers/wait.js';
import { buildWith, PYTHON, requireToolchains } from '../helpers/toolchains.js';
import { startTestSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { allow, CHECK_PATH, deny, startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

// docs/clients.md shows one function each for Python, Go and Java. Each snippet is the very file
// run here, against a real sidecar over TCP and over its Unix socket, and against a sidecar that
// answers what no sidecar should (the page's forward verifiers run in forward-verifiers.test.ts).

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const KEY = 'marketing-email';
const SOURCES = ['docs/clients/consent_check.py', 'docs/clients/consent_check.go', 'docs/clients/ConsentCheck.java', 'docs/clients/verify_forward.py', 'docs/clients/verify_forward.go', 'docs/clients/VerifyForward.java'] as const;

const work = mkdtempSync(join(tmpdir(), 'clients-'));
let up: ScriptedUpstream;
let tcp: TestSidecar;
let unix: TestSidecar;
const fake = new HostileSidecar();
const fakeUnix = new HostileSidecar();
let fakeUrls: string[];

/** Each run's deadline (the functions' timeout argument): a safety net on a busy machine, never what a test waits for. */
const DEADLINE = String(PATIENCE_MS);

/** How to run each language's file: `<argv…> <baseUrl> <userReference> <configKey>`. */
const RUNNERS: Record<string, string[]> = {
  python: [PYTHON, join(ROOT, SOURCES[0])],
  go: [join(work, 'consent_check')],
  // A short-lived JVM: C1 only and the serial collector start it in about half the time.
  java: ['java', '-XX:TieredStopAtLevel=1', '-XX:+UseSerialGC', '-cp', join(work, 'java'), 'ConsentCheck'],
};

function run(argv: string[]): Promise<{ code: number | null; out: string }> {
  // Not spawnSync: the service the sidecar asks lives in this process.
  const child = spawn(argv[0]!, argv.slice(1), { env: process.env });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, out: out.trim() }));
  });
}

/**
 * Java's cases go to one JVM (test/docs/ClientsHarness.java calls ConsentCheck.check and prints what
 * its main would, after the exit code main would give): a JVM per case cost the file most of its
 * time. ConsentCheck's own main runs once per transport (the first case), so what it prints and
 * its exit code stay under test.
 */
class OneJvm {
  private readonly child = spawn('java', ['-XX:+UseSerialGC', '-cp', join(work, 'java'), 'ClientsHarness'], { stdio: ['pipe', 'pipe', 'inherit'] });
  private readonly waiting: ((line: string) => void)[] = [];
  private buffered = '';

  constructor() {
    this.child.stdout.on('data', (c: Buffer) => {
      this.buffered += c.toString();
      for (let i; (i = this.buffered.indexOf('\n')) >= 0; ) {
        const line = this.buffered.slice(0, i);
        this.buffered = this.buffered.slice(i + 1);
        this.waiting.shift()?.(line);
      }
    });
  }

  /** One call, answered as a run of ConsentCheck's main would be: its exit code and what it printed. */
  ask(argv: readonly string[]): Promise<{ code: number | null; out: string }> {
    if (argv.some((a) => /[\t\n]/.test(a))) throw new Error(`a tab or newline in ${JSON.stringify(argv)}`);
    return new Promise((resolve, reject) => {
      this.child.once('exit', (code) => reject(new Error(`ClientsHarness exited (${code}) before answering`)));
      this.waiting.push((line) => {
        const tab = line.indexOf('\t');
        resolve({ code: Number(line.slice(0, tab)), out: line.slice(tab + 1) });
      });
      this.child.stdin.write(`${argv.join('\t')}\n`);
    });
  }

  close(): void {
    this.child.stdin.end();
  }
}
let jvm: OneJvm;
/** Transports whose first Java case went through ConsentCheck's own main. */
const javaMainRan = new Set<number>();

/** One case in `lang`: `<baseUrl> <userReference> <configKey> <timeout>`. */
function call(lang: string, args: string[], transport: number): Promise<{ code: number | null; out: string }> {
  if (lang !== 'java') return run([...RUNNERS[lang]!, ...args]);
  if (javaMainRan.has(transport)) return jvm.ask(args);
  javaMainRan.add(transport);
  return run([...RUNNERS.java!, ...args]);
}

beforeAll(async () => {
  requireToolchains();
  buildWith(['go', 'build', '-o', join(work, 'consent_check'), SOURCES[1]]);
  buildWith(['javac', '-d', join(work, 'java'), SOURCES[2], 'test/docs/ClientsHarness.java']);
  jvm = new OneJvm();
  up = await startUpstream();
  up.reply((req) => {
    if (req.url !== CHECK_PATH) return { status: 404, body: {} };
    const user = (JSON.parse(req.body) as { userReference: string }).userReference;
    if (user === 'alice') return { body: allow(KEY, Date.now() + 3_600_000) };
    if (user === 's500') return { status: 500, body: {} };
    return { body: deny(KEY) };
  });
  [tcp, unix] = await Promise.all([startTestSidecar(up.url), startTestSidecar(up.url, { listen: `unix:${join(work, 'decision.sock')}` })]);
  fakeUrls = [await fake.listen(), await fakeUnix.listen(join(work, 'hostile.sock'))];
  const later = Date.now() + 3_600_000;
  const hostile: Record<string, string> = {
    twice: `{"decision":"DENY","configKey":"${KEY}","decision":"ALLOW","validUntil":${later}}`,
    escaped_twice: `{"decision":"ALLOW","configKey":"${KEY}","validUntil":${later},"decisio\\u006e":"DENY"}`,
    string_until: JSON.stringify({ decision: 'ALLOW', configKey: KEY, validUntil: String(later) }),
    expired: JSON.stringify({ decision: 'ALLOW', configKey: KEY, validUntil: Date.now() - 1000 }),
    other_key: JSON.stringify({ decision: 'ALLOW', configKey: 'other', validUntil: later }),
    with_reason: JSON.stringify({ decision: 'ALLOW', configKey: KEY, validUntil: later, reason: 'x' }),
    float_until: `{"decision":"ALLOW","configKey":"${KEY}","validUntil":${later}.5}`,
  };
  for (const f of [fake, fakeUnix]) {
    for (const [name, body] of Object.entries(hostile)) f.script(name, { bytes: response(200, [['content-type', 'application/json']], body), then: 'end' });
    f.script('redirect', { bytes: response(302, [['location', '/v1/authorization/check'], ['content-type', 'application/json']], hostile.other_key!), then: 'end' });
  }
}, 300_000);
afterAll(async () => {
  jvm?.close();
  await Promise.allSettled([tcp?.close(), unix?.close(), fake.close(), fakeUnix.close()]);
  await up?.close();
  rmSync(work, { recursive: true, force: true });
});

describe('docs/clients.md', () => {
  it('shows each client exactly as the file the suite runs', () => {
    const page = docText('clients.md');
    for (const file of SOURCES) {
      const block = new RegExp(`<!-- snippet: ${file.replace(/\./g, '\\.')} -->\\n\`\`\`[a-z]+\\n([\\s\\S]*?)\`\`\`\\n`).exec(page)?.[1];
      expect(block, `${file} is not shown in docs/clients.md`).toBeDefined();
      expect(block, `docs/clients.md differs from ${file}`).toBe(readFileSync(join(ROOT, file), 'utf8'));
    }
  });

  describe.each(Object.keys(RUNNERS))('%s', (lang) => {
    it.each([['TCP', 0], ['the Unix socket', 1]])('against a real sidecar over %s: ALLOW, DENY, a 503, a dead sidecar', async (_, i) => {
      const base = [tcp.handle.urls.decision, unix.handle.urls.decision][i]!;
      const dead = [`http://127.0.0.1:${await refusedPort()}`, `unix:${join(work, 'nobody.sock')}`][i]!;
      const ask = (url: string, user: string): Promise<{ code: number | null; out: string }> => call(lang, [url, user, KEY, DEADLINE], i);
      const allowed = await ask(base, 'alice');
      expect(allowed.out).toMatch(/^allowed \d{13,}$/);
      expect(allowed.code).toBe(0);
      expect(await ask(base, 'bob')).toEqual({ code: 1, out: 'not_allowed deny evaluated' });
      expect(await ask(base, 's500')).toEqual({ code: 1, out: 'not_allowed no_decision upstream_5xx' });
      const none = await ask(dead, 'alice');
      expect(none.out).toMatch(/^not_allowed unavailable /);
      expect(none.code).toBe(1);
    });

    it.each([['TCP', 0], ['the Unix socket', 1]])('not allowed for a duplicated member, a string or fractional validUntil, an expired or foreign ALLOW, a redirect (%s)', async (_, i) => {
      for (const user of ['twice', 'escaped_twice', 'string_until', 'expired', 'other_key', 'with_reason', 'float_until', 'redirect']) {
        const r = await call(lang, [fakeUrls[i]!, user, KEY, DEADLINE], i);
        expect([r.code, r.out.startsWith('not_allowed unexpected_answer ')], `${lang} ${user}: ${r.out}`).toEqual([1, true]);
      }
    });
  });
});
