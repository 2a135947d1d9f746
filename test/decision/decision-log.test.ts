import { createHmac } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadServeConfig } from '../../src/config/index.js';
import { DecisionLog, failClosedAnswer } from '../../src/decision/index.js';
import { silentLogger } from '../../src/observability/index.js';
import { startTestSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { allow, deny, preDeny, startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { configProblems } from '../helpers/config.js';

const KEY = 'decision-log-key-0123456789';
/** Computed here with node:crypto, independently of src/decision/decision-log.ts. */
const hashOf = (ref: string): string => createHmac('sha256', KEY).update(ref).digest('hex').slice(0, 32);

let upstream: ScriptedUpstream | undefined;
let sidecar: TestSidecar | undefined;
afterEach(async () => {
  await sidecar?.close();
  await upstream?.close();
  sidecar = undefined;
  upstream = undefined;
});

const base = { 'upstream-url': 'http://127.0.0.1:1', 'api-key': 'k' };

describe('decision log configuration', () => {
  it('is off by default', () => {
    expect(loadServeConfig(base, {}).decisionLog).toBeNull();
  });

  it('names each bad flag', () => {
    const problems = configProblems({ ...base, 'decision-log': 'stdout', 'decision-log-sample-rate': '2', 'decision-log-hash-key': 'short', 'decision-log-buffer-bytes': '1' });
    expect(problems.join('\n')).toMatch(/--decision-log-sample-rate: must be a number from 0 to 1/);
    expect(problems.join('\n')).toMatch(/--decision-log-hash-key: the decision log hash key must be at least 16 characters/);
    expect(problems.join('\n')).toMatch(/--decision-log-buffer-bytes: must be an integer/);
    expect(problems.join('\n')).not.toContain('short');
  });
});

describe('decision log', () => {
  it('writes one JSON line per decision with configKey, decision, source, cause and a keyed hash, never the reference', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cs-decision-log-'));
    const file = join(dir, 'decisions.jsonl');
    upstream = await startUpstream();
    sidecar = await startTestSidecar(upstream.url, { 'decision-log': file, 'decision-log-hash-key': KEY });
    const until = Date.now() + 60_000;
    upstream.enqueue(
      { status: 200, body: allow('k1', until) },
      { status: 200, body: deny('k2') },
      { status: 200, body: preDeny('config_not_published') },
      { status: 500, body: {} },
    );
    const answers = [
      await sidecar.check({ userReference: 'alice-secret-ref', configKey: 'k1' }),
      await sidecar.check({ userReference: 'alice-secret-ref', configKey: 'k1' }), // cache hit
      await sidecar.check({ userReference: 'bob-secret-ref', configKey: 'k2' }),
      await sidecar.check({ userReference: 'carol-secret-ref', configKey: 'k3' }),
      await sidecar.check({ userReference: 'dave-secret-ref', configKey: 'k4' }),
    ];
    await sidecar.close();
    const text = readFileSync(file, 'utf8');
    const lines = text.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    // Each line names the decision id its answer carried, and no two answers share one.
    const ids = answers.map((a) => a.headers['x-consent-decision-id']);
    expect(lines.map((l) => l.decisionId)).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
    expect(lines.map(({ time: _t, decisionId: _d, ...rest }) => rest)).toEqual([
      { event: 'decision', configKey: 'k1', decision: 'allow', source: 'upstream', status: 200, userRefHash: hashOf('alice-secret-ref') },
      { event: 'decision', configKey: 'k1', decision: 'allow', source: 'cache', status: 200, userRefHash: hashOf('alice-secret-ref') },
      { event: 'decision', configKey: 'k2', decision: 'deny', source: 'upstream', status: 200, cause: 'evaluated', userRefHash: hashOf('bob-secret-ref') },
      { event: 'decision', configKey: 'k3', decision: 'deny', source: 'upstream', status: 200, cause: 'config_not_published', userRefHash: hashOf('carol-secret-ref') },
      { event: 'decision', configKey: 'k4', decision: 'deny', source: 'fail-closed', status: 503, cause: 'upstream_5xx', userRefHash: hashOf('dave-secret-ref') },
    ]);
    for (const l of lines) expect(Number.isNaN(Date.parse(String(l.time)))).toBe(false);
    expect(text).not.toContain('secret-ref');
  });

  it('samples, and drops (counting) instead of blocking when the buffer is full', async () => {
    const written: string[] = [];
    let buffered = 0;
    const sink = { write: (c: string) => (written.push(c), true), get writableLength() { return buffered; } };
    let dropped = 0;
    const randoms = [0.1, 0.9, 0.2, 0.6];
    const log = new DecisionLog(
      { destination: 'stdout', sampleRate: 0.5, hashKey: null, bufferBytes: 1024 },
      { logger: silentLogger(), dropped: { inc: () => void (dropped += 1) }, sink, random: () => randoms.shift() ?? 0 },
    );
    const a = failClosedAnswer('upstream_timeout');
    for (let i = 0; i < 4; i++) log.record({ userReference: `u${i}`, configKey: 'k' }, a);
    expect(written).toHaveLength(2); // 0.1 and 0.2 are under 0.5
    buffered = 1000; // the destination is slow: what waits plus a line is over 1024 bytes
    log.record({ userReference: 'u', configKey: 'k' }, a);
    expect(written).toHaveLength(2);
    expect(dropped).toBe(1);
  });

  it('exposes the drop counter from the start', async () => {
    upstream = await startUpstream();
    sidecar = await startTestSidecar(upstream.url);
    expect(await sidecar.metric('consent_sidecar_decision_log_dropped_total')).toBe(0);
  });
});
