import { createHmac } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { SECRET, startStack, type Stack } from './stack.js';

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

describe('simulator ⇄ sidecar ⇄ app', () => {
  it('grant → ALLOW, then from cache; revoke → verified webhook → purge → DENY', async () => {
    stack = await startStack();
    const { sim, sidecar, app } = stack;
    const erin = { userReference: 'erin', configKey: 'marketing-email' };

    const before = await sidecar.check(erin);
    expect(before.json).toStrictEqual({ decision: 'DENY', configKey: 'marketing-email' });
    expect(before.source).toBe('upstream');

    const grant = await fetch(`${sim.url}/_simulator/consents/grant`, {
      method: 'POST',
      body: JSON.stringify({ ...erin, ttlMs: 3_600_000 }),
    });
    expect(grant.status).toBe(200);
    await sim.deliveriesSettled();

    const first = await sidecar.check(erin);
    expect(first.status).toBe(200);
    expect(first.json).toMatchObject({ decision: 'ALLOW', configKey: 'marketing-email' });
    expect(first.source).toBe('upstream');
    const second = await sidecar.check(erin);
    expect(second.source).toBe('cache');
    expect(second.json).toStrictEqual(first.json);

    const received = app.received.length;
    sim.revokeConsent(erin);
    await sim.deliveriesSettled();
    expect(sim.deliveries().at(-1)).toMatchObject({ eventType: 'consent_action.created', state: 'accepted' });

    // the app got the revocation once, verified by the sidecar, body byte-identical to what the service signed
    const got = app.received.slice(received);
    expect(got).toHaveLength(1);
    const delivery = got[0]!;
    expect(delivery.headers['x-consent-sidecar-verified']).toBe('v1');
    const ts = String(delivery.headers['x-service-timestamp']);
    expect(delivery.headers['x-service-signature']).toBe(`v1=${createHmac('sha256', SECRET).update(`${ts}.${delivery.raw}`).digest('hex')}`);
    expect(JSON.parse(delivery.raw)).toMatchObject({ type: 'consent_action.created', data: { action: 'revoke', userReference: 'erin' } });

    const after = await sidecar.check(erin);
    expect(after.source).toBe('upstream');
    expect(after.json).toStrictEqual({ decision: 'DENY', configKey: 'marketing-email' });
  });

  it('relays each pre-evaluation reason and fails closed on injected faults', async () => {
    stack = await startStack();
    const { sim, sidecar } = stack;
    for (const [userReference, configKey, reason] of [
      ['nobody', 'marketing-email', 'customer_not_found'],
      ['alice', 'loyalty-program', 'config_not_published'],
      ['alice', 'onboarding-bundle', 'ambiguous_config'],
      ['alice', 'partner-sharing', 'config_material_unavailable'],
    ] as const) {
      const res = await sidecar.check({ userReference, configKey });
      expect(res.status).toBe(200);
      expect(res.json).toStrictEqual({ decision: 'DENY', reason });
    }
    // until cleared: the sidecar may retry within its deadline, and every retry must fail too
    for (const fault of [{ status: 500 }, { reset: true }, { malformed: true }, { trickleMs: 100 }]) {
      sim.injectFault(fault);
      const res = await sidecar.check({ userReference: 'alice', configKey: 'marketing-email' }, { 'cache-control': 'no-cache' });
      expect(res.status, JSON.stringify(fault)).toBe(503);
      expect(res.json).toMatchObject({ decision: 'DENY' });
      expect(res.source).toBe('fail-closed');
      sim.clearFaults();
    }
    const healthy = await sidecar.check({ userReference: 'alice', configKey: 'marketing-email' }, { 'cache-control': 'no-cache' });
    expect(healthy.json).toMatchObject({ decision: 'ALLOW' });
  });
});
