import { afterEach, describe, expect, it } from 'vitest';
import { startTestSidecar, type TestSidecar } from '../../helpers/sidecar.js';
import { allow, deny, preDeny, startUpstream, type ScriptedUpstream } from '../../helpers/upstream.js';
import { eventually } from '../../helpers/wait.js';

// The admin listener after a scripted sequence of checks: the metric families of CONTRACT.md with
// the expected values, bounded labels, and the probes.

const KEY = 'flow-metrics';
const USERS = ['alice@example.test', 'user-7f3a9c', 'bob-secret-ref'];

let upstream: ScriptedUpstream | undefined;
let sidecar: TestSidecar | undefined;

afterEach(async () => {
  await sidecar?.close();
  await upstream?.close();
  sidecar = undefined;
  upstream = undefined;
});

describe('metrics after a scripted sequence', () => {
  it('counts decisions by source, fail-closed causes, cache entries and upstream outcomes, with no user reference in any label', async () => {
    upstream = await startUpstream();
    // One check meets the (base, 5 s) deadline: a service that never answers; the others never race it.
    sidecar = await startTestSidecar(upstream.url);
    const s = sidecar;
    const u = upstream;
    const [alice, carol, bob] = USERS as [string, string, string];

    u.reply({ body: allow(KEY, Date.now() + 60_000) });
    await s.check({ userReference: alice, configKey: KEY }); // allow / upstream, ok
    await s.check({ userReference: alice, configKey: KEY }); // allow / cache
    await s.check({ userReference: alice, configKey: KEY }); // allow / cache
    u.reply({ body: deny(KEY) });
    await s.check({ userReference: bob, configKey: KEY }); // deny / upstream, ok
    u.reply({ body: preDeny('customer_not_found') });
    await s.check({ userReference: carol, configKey: KEY }); // deny / upstream, ok, pre-evaluation
    u.reply({ status: 500 });
    await s.check({ userReference: bob, configKey: 'flow-b' }); // deny / fail_closed, upstream_5xx, http_5xx
    u.reply({ status: 404 });
    await s.check({ userReference: bob, configKey: 'flow-c' }); // deny / fail_closed, upstream_4xx, http_4xx
    u.reply({ body: allow('flow-other', Date.now() + 60_000) });
    await s.check({ userReference: carol, configKey: 'flow-d' }); // deny / fail_closed, contradictory, invalid_response
    u.reply({ fault: 'hang' });
    await s.check({ userReference: carol, configKey: 'flow-e' }); // deny / fail_closed, upstream_timeout, timeout
    u.reply({ fault: 'reset' });
    await s.check({ userReference: carol, configKey: 'flow-f' }); // deny / fail_closed, upstream_unreachable, network_error
    await s.check({ userReference: carol }); // deny / rejected
    await s.check('not json'); // deny / rejected

    const text = await s.metricsText();
    const m = (name: string, labels: Record<string, string> = {}): number => {
      const line = text.split('\n').filter((l) => l.startsWith(name + '{') || l.startsWith(name + ' '));
      let sum = 0;
      for (const l of line) if (Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`))) sum += Number(l.split(' ').at(-1));
      return sum;
    };

    expect(m('consent_sidecar_decisions_total', { decision: 'allow', source: 'upstream' })).toBe(1);
    expect(m('consent_sidecar_decisions_total', { decision: 'allow', source: 'cache' })).toBe(2);
    expect(m('consent_sidecar_decisions_total', { decision: 'deny', source: 'upstream' })).toBe(2);
    expect(m('consent_sidecar_decisions_total', { decision: 'deny', source: 'fail_closed' })).toBe(5);
    expect(m('consent_sidecar_decisions_total', { decision: 'deny', source: 'rejected' })).toBe(2);
    expect(m('consent_sidecar_decisions_total', { decision: 'deny', source: 'cache' })).toBe(0);
    expect(m('consent_sidecar_decisions_total', { decision: 'allow', source: 'fail_closed' })).toBe(0);
    expect(m('consent_sidecar_decisions_total', { decision: 'allow', source: 'rejected' })).toBe(0);
    expect(m('consent_sidecar_decisions_total')).toBe(12);

    expect(m('consent_sidecar_fail_closed_total', { cause: 'upstream_5xx' })).toBe(1);
    expect(m('consent_sidecar_fail_closed_total', { cause: 'upstream_4xx' })).toBe(1);
    expect(m('consent_sidecar_fail_closed_total', { cause: 'contradictory_response' })).toBe(1);
    expect(m('consent_sidecar_fail_closed_total', { cause: 'upstream_timeout' })).toBe(1);
    expect(m('consent_sidecar_fail_closed_total', { cause: 'upstream_unreachable' })).toBe(1);
    expect(m('consent_sidecar_fail_closed_total')).toBe(5);

    expect(m('consent_sidecar_pre_evaluation_denials_total', { reason: 'customer_not_found' })).toBe(1);
    expect(m('consent_sidecar_pre_evaluation_denials_total')).toBe(1);

    expect(m('consent_sidecar_cache_entries')).toBe(1);

    expect(m('consent_sidecar_upstream_request_duration_seconds_count', { outcome: 'ok' })).toBe(3);
    expect(m('consent_sidecar_upstream_request_duration_seconds_count', { outcome: 'http_5xx' })).toBe(1);
    expect(m('consent_sidecar_upstream_request_duration_seconds_count', { outcome: 'http_4xx' })).toBe(1);
    expect(m('consent_sidecar_upstream_request_duration_seconds_count', { outcome: 'invalid_response' })).toBe(1);
    expect(m('consent_sidecar_upstream_request_duration_seconds_count', { outcome: 'timeout' })).toBe(1);
    expect(m('consent_sidecar_upstream_request_duration_seconds_count', { outcome: 'network_error' })).toBe(1);
    expect(m('consent_sidecar_upstream_request_duration_seconds_count')).toBe(8);
    // The timeout took at least the deadline; its sum says so.
    expect(m('consent_sidecar_upstream_request_duration_seconds_sum', { outcome: 'timeout' })).toBeGreaterThanOrEqual(4.99);

    for (const user of USERS) expect(text).not.toContain(user);
    expect(text).not.toContain('flow-metrics');
    expect(text).not.toContain('test-api-key');

    // The registry the handle exposes is the one /metrics serves.
    expect(await s.handle.registry.metrics()).toContain('consent_sidecar_decisions_total');
  });

  it('exposes every metric family of CONTRACT.md, with bounded label sets', async () => {
    upstream = await startUpstream({ body: deny(KEY) });
    sidecar = await startTestSidecar(upstream.url);
    await sidecar.check({ userReference: USERS[0], configKey: KEY });
    const res = await sidecar.admin('/metrics');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain/);
    const families: [string, string][] = [
      ['consent_sidecar_decisions_total', 'counter'],
      ['consent_sidecar_pre_evaluation_denials_total', 'counter'],
      ['consent_sidecar_fail_closed_total', 'counter'],
      ['consent_sidecar_upstream_request_duration_seconds', 'histogram'],
      ['consent_sidecar_cache_entries', 'gauge'],
      ['consent_sidecar_circuit_breaker_state', 'gauge'],
    ];
    for (const [name, type] of families) expect(res.text).toMatch(new RegExp(`^# TYPE ${name} ${type}$`, 'm'));
    const allowed: Record<string, Set<string>> = {
      decision: new Set(['allow', 'deny']),
      source: new Set(['cache', 'upstream', 'fail_closed', 'rejected']),
      reason: new Set(['customer_not_found', 'config_not_published', 'ambiguous_config', 'config_material_unavailable', 'other']),
      state: new Set(['closed', 'open', 'half_open']),
    };
    for (const line of res.text.split('\n')) {
      if (!line.startsWith('consent_sidecar_')) continue;
      for (const [, k, v] of line.matchAll(/([a-z_]+)="([^"]*)"/g)) if (allowed[k!]) expect(allowed[k!]!.has(v!), line).toBe(true);
    }
  });

  it('a pre-evaluation denial with an unknown reason carrying a user reference leaves no trace of it in the labels', async () => {
    upstream = await startUpstream({ body: preDeny(`customer ${USERS[1]} unknown`) });
    sidecar = await startTestSidecar(upstream.url);
    await sidecar.check({ userReference: USERS[1], configKey: KEY });
    const text = await sidecar.metricsText();
    expect(text).not.toContain(USERS[1]);
    expect(await sidecar.metric('consent_sidecar_pre_evaluation_denials_total', { reason: 'other' })).toBe(1);
  });
});

describe('probes', () => {
  it('/healthz is 200 and /readyz is 200 after start', async () => {
    upstream = await startUpstream();
    sidecar = await startTestSidecar(upstream.url);
    const h = await sidecar.admin('/healthz');
    expect(h.status).toBe(200);
    const r = await sidecar.admin('/readyz');
    expect(r.status).toBe(200);
  });

  it('/readyz does not depend on the service: 200 while the breaker is open and the service is gone', async () => {
    upstream = await startUpstream({ status: 500 });
    sidecar = await startTestSidecar(upstream.url, { 'breaker-failure-threshold': '2' });
    await upstream.close();
    for (let i = 0; i < 3; i++) await sidecar.check({ userReference: 'u', configKey: KEY });
    expect(await sidecar.metric('consent_sidecar_circuit_breaker_state', { state: 'open' })).toBe(1);
    expect((await sidecar.admin('/readyz')).status).toBe(200);
  });

  it('/readyz is 503 once close() began, while an in-flight check is finished (then answered, not dropped)', async () => {
    // The service holds its answer until /readyz has been read: the check is surely still in flight.
    let release = (): void => undefined;
    const held = new Promise<void>((r) => (release = r));
    upstream = await startUpstream({ hold: held, body: allow(KEY, Date.now() + 60_000) });
    sidecar = await startTestSidecar(upstream.url, { 'shutdown-timeout-ms': '600000' });
    const s = sidecar;
    const inFlight = s.check({ userReference: 'u', configKey: KEY });
    await upstream.waitForCount(1);
    const closing = s.handle.close(); // draining starts at once: readiness flips before close() awaits anything
    const r = await s.admin('/readyz');
    expect(r.status).toBe(503);
    expect(r.json?.status).toBe('not_ready');
    release();
    const answer = await inFlight;
    expect(answer.status).toBe(200);
    expect(answer.json?.decision).toBe('ALLOW');
    await closing;
  });

  it('close() ends soon after the in-flight check is answered, though the app keeps its connection open (not at the shutdown timeout)', async () => {
    let release = (): void => undefined;
    const held = new Promise<void>((r) => (release = r));
    upstream = await startUpstream({ hold: held, body: allow(KEY, Date.now() + 60_000) });
    // Ten minutes of shutdown timeout: close() ending at all shows it did not wait for it (was: in
    // less than 2.5 s of a 5 s timeout, a timing bound that a busy machine broke).
    sidecar = await startTestSidecar(upstream.url, { 'shutdown-timeout-ms': '600000' });
    const inFlight = sidecar.check({ userReference: 'u', configKey: KEY });
    await upstream.waitForCount(1);
    const closing = sidecar.handle.close();
    release();
    const answer = await inFlight;
    expect(answer.status).toBe(200);
    expect(answer.json?.decision).toBe('ALLOW');
    await eventually(closing, 'close() after the in-flight check was answered, the app idle on its kept-alive connection');
  });
});
