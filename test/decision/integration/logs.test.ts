import { afterEach, describe, expect, it } from 'vitest';
import { capturingLogger, startTestSidecar, testClock, type TestSidecar } from '../../helpers/sidecar.js';
import { allow, preDeny, startUpstream, type ScriptedUpstream } from '../../helpers/upstream.js';

// Pre-evaluation denials are alerted on apart: one warn line per (reason, configKey) per interval, and 10 lines in all,
// with reason and configKey, never the userReference; and no log line ever carries a user
// reference or the API key.

const USER = 'user-logged-8d1e@example.test';

let upstream: ScriptedUpstream | undefined;
let sidecar: TestSidecar | undefined;

afterEach(async () => {
  await sidecar?.close();
  await upstream?.close();
  sidecar = undefined;
  upstream = undefined;
});

describe('logs of the decision API', () => {
  it('warns once per (reason, configKey) per interval with reason and configKey, then reports what it held back', async () => {
    const clock = testClock();
    const cap = capturingLogger();
    upstream = await startUpstream({ body: preDeny('config_not_published') });
    sidecar = await startTestSidecar(upstream.url, { 'pre-evaluation-log-interval-ms': '60000' }, { now: clock.now, logger: cap.logger });
    for (let i = 0; i < 3; i++) await sidecar.check({ userReference: USER, configKey: 'flow-a' });
    await sidecar.check({ userReference: USER, configKey: 'flow-b' });
    let warns = cap.lines().filter((l) => l.event === 'pre_evaluation_denial');
    expect(warns).toHaveLength(2);
    expect(warns[0]).toMatchObject({ level: 'warn', reason: 'config_not_published', configKey: 'flow-a', suppressedSinceLast: 0 });
    expect(warns[1]).toMatchObject({ level: 'warn', reason: 'config_not_published', configKey: 'flow-b' });

    clock.advance(60_000);
    await sidecar.check({ userReference: USER, configKey: 'flow-a' });
    warns = cap.lines().filter((l) => l.event === 'pre_evaluation_denial');
    expect(warns).toHaveLength(3);
    expect(warns[2]).toMatchObject({ configKey: 'flow-a', suppressedSinceLast: 2 });
    // Every denial is still counted, logged or not.
    expect(await sidecar.metric('consent_sidecar_pre_evaluation_denials_total', { reason: 'config_not_published' })).toBe(5);
  });

  it('is rate-limited like the other warn lines: 200 distinct configKeys give 10 lines per interval, and the next line says how many were held back (issue 20)', async () => {
    const clock = testClock();
    const cap = capturingLogger();
    upstream = await startUpstream({ body: preDeny('config_not_published') });
    sidecar = await startTestSidecar(upstream.url, { 'pre-evaluation-log-interval-ms': '60000' }, { now: clock.now, logger: cap.logger });
    for (let i = 0; i < 200; i++) await sidecar.check({ userReference: USER, configKey: `flow-${i}` });
    let warns = cap.lines().filter((l) => l.event === 'pre_evaluation_denial');
    expect(warns).toHaveLength(10);
    expect(warns.map((w) => w.configKey)).toEqual(Array.from({ length: 10 }, (_, i) => `flow-${i}`));
    // Every denial is still counted.
    expect(await sidecar.metric('consent_sidecar_pre_evaluation_denials_total', { reason: 'config_not_published' })).toBe(200);

    clock.advance(60_000);
    await sidecar.check({ userReference: USER, configKey: 'flow-199' });
    warns = cap.lines().filter((l) => l.event === 'pre_evaluation_denial');
    expect(warns).toHaveLength(11);
    expect(warns[10]).toMatchObject({ configKey: 'flow-199', suppressedSinceLast: 0, suppressedOverLimit: 190 });
  });

  it('no log line carries a user reference or the API key, through ALLOW, denials, failures, purges and passthrough', async () => {
    const cap = capturingLogger('debug');
    upstream = await startUpstream({ body: allow('flow-a', Date.now() + 60_000) });
    sidecar = await startTestSidecar(upstream.url, { 'api-key': 'sk_live_very_secret_key', 'breaker-failure-threshold': '2' }, { logger: cap.logger });
    const s = sidecar;
    const u = upstream;
    await s.check({ userReference: USER, configKey: 'flow-a' });
    await s.check({ userReference: USER, configKey: 'flow-a' });
    u.reply({ body: preDeny('customer_not_found') });
    await s.check({ userReference: USER, configKey: 'flow-b' });
    u.reply({ status: 500, body: { error: `no such customer ${USER}` } });
    await s.check({ userReference: USER, configKey: 'flow-c' });
    u.reply({ body: `{"decision":"ALLOW","configKey":"${USER}"` });
    await s.check({ userReference: USER, configKey: 'flow-d' });
    await s.check({ userReference: USER, configKey: 'flow-e' }); // circuit open
    await s.check({ userReference: USER }); // rejected
    await s.send('DELETE', `/sidecar/cache?userReference=${encodeURIComponent(USER)}`);
    u.reply({ body: 'ok' });
    await s.send('GET', `/v1/customers/${encodeURIComponent(USER)}/consent-compliance`, { headers: { authorization: 'Bearer app-token' } });
    await s.close();

    const text = cap.raw();
    expect(text.length).toBeGreaterThan(0);
    expect(cap.lines().some((l) => l.event === 'pre_evaluation_denial')).toBe(true);
    expect(cap.lines().some((l) => l.event === 'fail_closed')).toBe(true);
    expect(text).not.toContain(USER);
    expect(text).not.toContain(encodeURIComponent(USER));
    expect(text).not.toContain('sk_live_very_secret_key');
    expect(text).not.toContain('app-token');
  });
});
