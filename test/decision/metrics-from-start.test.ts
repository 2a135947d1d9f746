import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAIL_CLOSED_CAUSES, PRE_EVALUATION_REASONS } from '../../src/decision/index.js';
import { sampleOf, startTestSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

// A dashboard of a healthy pod shows 0 for every fail-closed cause and every pre-evaluation reason,
// not "no data": each series is in /metrics from the start, before any check was asked.

let up: ScriptedUpstream;
let s: TestSidecar;
beforeAll(async () => {
  up = await startUpstream();
  s = await startTestSidecar(up.url);
});
afterAll(async () => {
  await s?.close();
  await up?.close();
});

/** The value of the one series of `name` with exactly `label="value"`, or undefined when it is not exported. */
function series(text: string, name: string, label: string, value: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${label}="${value}"} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('decision metrics exported from the start', () => {
  it('every fail-closed cause at 0, and every pre-evaluation reason (and other) at 0, before any check', async () => {
    const text = await s.metricsText();
    expect(FAIL_CLOSED_CAUSES.length).toBeGreaterThan(5);
    for (const cause of FAIL_CLOSED_CAUSES) expect(series(text, 'consent_sidecar_fail_closed_total', 'cause', cause), cause).toBe(0);
    for (const reason of [...PRE_EVALUATION_REASONS, 'other']) expect(series(text, 'consent_sidecar_pre_evaluation_denials_total', 'reason', reason), reason).toBe(0);
    expect(up.checks).toBe(0);
  });

  it('and then counts: one 503 moves its cause to 1, the others stay at 0', async () => {
    up.reply({ status: 500, body: {} });
    expect((await s.check({ userReference: 'u', configKey: 'k' })).status).toBe(503);
    const text = await s.metricsText();
    expect(series(text, 'consent_sidecar_fail_closed_total', 'cause', 'upstream_5xx')).toBe(1);
    expect(sampleOf(text, 'consent_sidecar_fail_closed_total')).toBe(1);
  });
});
