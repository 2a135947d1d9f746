import { afterEach, describe, expect, it, vi } from 'vitest';
import { startSimulator, type SimulatorHandle } from '../../src/simulator/index.js';
import { RECONCILED_EVENT_TYPE } from '../../src/redec/index.js';
import { capturingLogger, testClock } from '../helpers/sidecar.js';
import { metricValue, startApp, type FakeApp } from '../helpers/webhooks.js';
import { reconcilerFor, upstreamOf, type ReconcilerUnderTest } from '../helpers/redec.js';

const KEY = 'redec-key';
let sim: SimulatorHandle | undefined;
let app: FakeApp | undefined;
let under: ReconcilerUnderTest | undefined;
afterEach(async () => {
  await under?.close();
  await sim?.close();
  await app?.close();
  sim = app = under = undefined;
});

/** Five tenant obligations pending (alice revoke, bob..erin grant) and one the service sends itself. */
async function simWithObligations(): Promise<SimulatorHandle> {
  const s = await startSimulator({ apiKey: KEY });
  s.revokeConsent({ userReference: 'alice', configKey: 'credit-report' });
  for (const u of ['bob', 'carol', 'dave', 'erin']) s.grantConsent({ userReference: u, configKey: 'credit-report' });
  s.grantConsent({ userReference: 'bob', configKey: 'open-finance' }); // service responsibility: never pending
  return s;
}

async function pendingListing(s: SimulatorHandle): Promise<Record<string, unknown>[]> {
  const res = await fetch(`${s.url}/v1/redec/notification-requirements?status=pending&limit=500`, { headers: { authorization: `Bearer ${KEY}` } });
  return ((await res.json()) as { items: Record<string, unknown>[] }).items;
}

const bodies = (a: FakeApp): Record<string, unknown>[] => a.received.map((r) => JSON.parse(r.body.toString('utf8')) as Record<string, unknown>);

describe('REDEC reconciler against the simulator', () => {
  it('the gauge equals the listing; each obligation reaches the app once after the grace, marked reconciled and never verified', async () => {
    sim = await simWithObligations();
    app = await startApp();
    const clock = testClock();
    const { logger, lines } = capturingLogger();
    under = reconcilerFor({ upstream: upstreamOf(sim.url, KEY), appUrl: app.url, now: clock.now, logger, graceMs: 60_000, pageLimit: 2 });
    const listing = await pendingListing(sim);
    expect(listing).toHaveLength(5);

    expect(await under.reconciler.runOnce()).toBe('ok');
    expect(await metricValue(under.registry, 'consent_sidecar_redec_pending_obligations')).toBe(listing.length);
    expect(app.received).toHaveLength(0); // within the grace
    clock.advance(30_000);
    expect(await metricValue(under.registry, 'consent_sidecar_redec_oldest_pending_age_seconds')).toBe(30);
    expect(await under.reconciler.runOnce()).toBe('ok');
    expect(app.received).toHaveLength(0);

    clock.advance(30_000);
    expect(await under.reconciler.runOnce()).toBe('ok');
    expect(app.received).toHaveLength(5);
    const got = bodies(app);
    expect(got.map((b) => b.type)).toEqual(Array(5).fill(RECONCILED_EVENT_TYPE));
    expect(got.map((b) => b.data).sort((a, b) => String((a as { notificationRequirementId: string }).notificationRequirementId).localeCompare(String((b as { notificationRequirementId: string }).notificationRequirementId)))).toEqual(listing);
    for (const b of got) {
      expect(Object.keys(b).sort()).toEqual(['data', 'id', 'occurredAt', 'type']);
      expect(b.id).toMatch(/^reconcile_[0-9a-f]{32}$/);
      expect(b.occurredAt).toBe(clock.now());
    }
    expect(new Set(got.map((b) => b.id)).size).toBe(5);
    for (const r of app.received) {
      expect(r.headers['x-consent-sidecar-reconciled']).toBe('1');
      expect(r.headers['x-consent-sidecar-verified']).toBeUndefined();
      expect(Object.keys(r.headers).filter((h) => h.startsWith('x-service-'))).toEqual([]);
      expect(r.headers['content-type']).toBe('application/json');
    }
    expect(await metricValue(under.registry, 'consent_sidecar_redec_handed_to_app_total', { outcome: 'accepted' })).toBe(5);

    // Still pending, within the repeat interval: not handed again.
    clock.advance(60_000);
    expect(await under.reconciler.runOnce()).toBe('ok');
    expect(app.received).toHaveLength(5);
    expect(await metricValue(under.registry, 'consent_sidecar_redec_reconcile_runs_total', { outcome: 'ok' })).toBe(4);
    // Which member held the records is logged once.
    expect(lines().filter((l) => l.event === 'redec_listing_fields')).toEqual([expect.objectContaining({ itemsField: 'items', cursorParam: 'cursor' })]);
  });

  it('an obligation that gets its evidence leaves the listing and is not handed again; the rest are, after the repeat interval', async () => {
    sim = await simWithObligations();
    app = await startApp();
    const clock = testClock();
    under = reconcilerFor({ upstream: upstreamOf(sim.url, KEY), appUrl: app.url, now: clock.now, logger: capturingLogger().logger, graceMs: 0, repeatMs: 3_600_000 });
    await under.reconciler.runOnce();
    expect(app.received).toHaveLength(5);
    const alice = bodies(app).find((b) => (b.data as { customerTenantId: string }).customerTenantId === 'alice')!;
    const consent = (alice.data as { redecConsentId: string }).redecConsentId;
    // The tenant sends the notice, then registers the evidence (through the sidecar in production).
    const ev = await fetch(`${sim.url}/v1/redec/consents/${consent}/notification-evidence`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(ev.status).toBe(200);
    clock.advance(3_600_000);
    await under.reconciler.runOnce();
    expect(await metricValue(under.registry, 'consent_sidecar_redec_pending_obligations')).toBe(4);
    const again = bodies(app).slice(5);
    expect(again).toHaveLength(4);
    expect(again.map((b) => b.id)).not.toContain(alice.id);
  });

  it('without an app URL it lists and measures but hands nothing', async () => {
    sim = await simWithObligations();
    const clock = testClock();
    const { logger } = capturingLogger();
    under = reconcilerFor({ upstream: upstreamOf(sim.url, KEY), appUrl: null, now: clock.now, logger, graceMs: 0 });
    expect(await under.reconciler.runOnce()).toBe('ok');
    expect(await metricValue(under.registry, 'consent_sidecar_redec_pending_obligations')).toBe(5);
    expect(await metricValue(under.registry, 'consent_sidecar_redec_handed_to_app_total')).toBe(0);
  });

  it('an app that refuses is counted failed, and the obligation is handed again at the next run', async () => {
    sim = await simWithObligations();
    app = await startApp();
    app.behaviour = { status: 503 };
    const clock = testClock();
    under = reconcilerFor({ upstream: upstreamOf(sim.url, KEY), appUrl: app.url, now: clock.now, logger: capturingLogger().logger, graceMs: 0 });
    expect(await under.reconciler.runOnce()).toBe('ok');
    expect(await metricValue(under.registry, 'consent_sidecar_redec_handed_to_app_total', { outcome: 'failed' })).toBe(5);
    app.behaviour = { status: 200 };
    await under.reconciler.runOnce();
    expect(await metricValue(under.registry, 'consent_sidecar_redec_handed_to_app_total', { outcome: 'accepted' })).toBe(5);
    await under.reconciler.runOnce();
    expect(app.received).toHaveLength(10);
  });

  it('closing during a hand-off to an app that never answers ends the run at once (not after the forward timeout)', async () => {
    sim = await simWithObligations();
    app = await startApp();
    app.behaviour = 'hang';
    const clock = testClock();
    // A forward timeout far beyond the test's own: only closing can end this run in time.
    under = reconcilerFor({ upstream: upstreamOf(sim.url, KEY), appUrl: app.url, now: clock.now, logger: capturingLogger().logger, graceMs: 0, forwardTimeoutMs: 600_000 });
    const run = under.reconciler.runOnce();
    await vi.waitFor(() => expect(app!.received.length).toBeGreaterThan(0), { timeout: 10_000, interval: 10 });
    await under.close();
    under = undefined;
    expect(await run).toBe('ok');
  });
});
