import { afterEach, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatorHandle } from '../../src/simulator/index.js';
import { check } from '../helpers/simulator.js';

const KEY = 'sim_key_for_tests';
const T0 = Date.UTC(2026, 0, 1);
let sim: SimulatorHandle | undefined;
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

async function start(now: () => number = () => T0, decisionLifetimeMs = 60_000): Promise<SimulatorHandle> {
  sim = await startSimulator({ apiKey: KEY, now, decisionLifetimeMs });
  return sim;
}

describe('POST /v1/authorization/check', () => {
  it('requires the Bearer key', async () => {
    const s = await start();
    for (const key of ['wrong', `${KEY}x`, '']) {
      expect((await check(s.url, key, { userReference: 'alice', configKey: 'marketing-email' })).status).toBe(401);
    }
    const res = await fetch(`${s.url}/v1/authorization/check`, { method: 'POST', body: '{}' });
    expect(res.status).toBe(401);
  });

  it.each([
    ['alice', 'marketing-email', { decision: 'ALLOW', configKey: 'marketing-email', validUntil: T0 + 60_000 }],
    ['bob', 'marketing-email', { decision: 'DENY', configKey: 'marketing-email' }],
    ['carol', 'marketing-email', { decision: 'DENY', configKey: 'marketing-email' }],
    ['dave', 'marketing-email', { decision: 'DENY', configKey: 'marketing-email' }],
    ['erin', 'marketing-email', { decision: 'DENY', configKey: 'marketing-email' }],
    ['nobody', 'marketing-email', { decision: 'DENY', reason: 'customer_not_found' }],
    ['alice', 'no-such-flow', { decision: 'DENY', reason: 'config_not_published' }],
    ['alice', 'loyalty-program', { decision: 'DENY', reason: 'config_not_published' }],
    ['alice', 'onboarding-bundle', { decision: 'DENY', reason: 'ambiguous_config' }],
    ['alice', 'partner-sharing', { decision: 'DENY', reason: 'config_material_unavailable' }],
  ])('%s / %s answers exactly the documented form', async (userReference, configKey, expected) => {
    const s = await start();
    const res = await check(s.url, KEY, { userReference, configKey });
    expect(res.status).toBe(200);
    expect(res.body).toStrictEqual(expected);
    expect(res.headers.get('content-type')).toBe('application/json');
    // node sends a real Date header; the sidecar uses it to detect clock skew
    expect(Math.abs(Date.parse(res.headers.get('date') ?? '') - Date.now())).toBeLessThan(2000);
  });

  it('bounds validUntil by the consent expiry', async () => {
    const s = await start(() => T0, 3_600_000);
    s.grantConsent({ userReference: 'erin', configKey: 'marketing-email', expiresAt: T0 + 90_000 });
    expect((await check(s.url, KEY, { userReference: 'erin', configKey: 'marketing-email' })).body).toStrictEqual({
      decision: 'ALLOW',
      configKey: 'marketing-email',
      validUntil: T0 + 90_000,
    });
  });

  it('denies once the expiry passes, with time moving', async () => {
    let now = T0;
    const s = await start(() => now);
    s.grantConsent({ userReference: 'erin', configKey: 'marketing-email', ttlMs: 1000 });
    expect((await check(s.url, KEY, { userReference: 'erin', configKey: 'marketing-email' })).body.decision).toBe('ALLOW');
    now = T0 + 1000;
    expect((await check(s.url, KEY, { userReference: 'erin', configKey: 'marketing-email' })).body).toStrictEqual({
      decision: 'DENY',
      configKey: 'marketing-email',
    });
  });

  it('uses the real clock by default: validUntil within the lifetime of now', async () => {
    sim = await startSimulator({ apiKey: KEY, decisionLifetimeMs: 5000 });
    const before = Date.now();
    const res = await check(sim.url, KEY, { userReference: 'alice', configKey: 'marketing-email' });
    const validUntil = res.body.validUntil as number;
    expect(validUntil).toBeGreaterThanOrEqual(before + 5000);
    expect(validUntil).toBeLessThanOrEqual(Date.now() + 5000);
  });

  it('follows revoke, expire and re-grant', async () => {
    const s = await start();
    const ask = async () => (await check(s.url, KEY, { userReference: 'alice', configKey: 'marketing-email' })).body;
    s.revokeConsent({ userReference: 'alice', configKey: 'marketing-email' });
    expect(await ask()).toStrictEqual({ decision: 'DENY', configKey: 'marketing-email' });
    s.grantConsent({ userReference: 'alice', configKey: 'marketing-email' });
    expect((await ask()).decision).toBe('ALLOW');
    s.expireConsent({ userReference: 'alice', configKey: 'marketing-email' });
    expect(await ask()).toStrictEqual({ decision: 'DENY', configKey: 'marketing-email' });
    s.grantConsent({ userReference: 'alice', consentId: 'con_marketing_email', scopes: ['scp_newsletter'] });
    expect(await ask()).toStrictEqual({ decision: 'DENY', configKey: 'marketing-email' });
  });

  it('resolves the latest published version, ignoring drafts', async () => {
    const s = await start();
    const ask = async () => (await check(s.url, KEY, { userReference: 'alice', configKey: 'marketing-email' })).body;
    expect((await ask()).decision).toBe('ALLOW');
    // a newer draft changes nothing
    s.publishFlowVersion('marketing-email', { version: 10, published: false, consents: [] });
    expect((await ask()).decision).toBe('ALLOW');
    // a newer published version with two required scopes is ambiguous
    s.publishFlowVersion('marketing-email', {
      consents: [
        {
          consentId: 'con_marketing_email',
          scopes: [
            { scopeId: 'scp_email', required: true, combinations: [{ requirement: 'consent', use: 'email_marketing' }] },
            { scopeId: 'scp_newsletter', required: true, combinations: [{ requirement: 'consent', use: 'newsletter' }] },
          ],
        },
      ],
    });
    expect(await ask()).toStrictEqual({ decision: 'DENY', reason: 'ambiguous_config' });
    // one required scope with two combinations is ambiguous too
    s.publishFlowVersion('marketing-email', {
      consents: [
        {
          consentId: 'con_marketing_email',
          scopes: [
            {
              scopeId: 'scp_email',
              required: true,
              combinations: [
                { requirement: 'consent', use: 'email_marketing' },
                { requirement: 'consent', use: 'sms_marketing' },
              ],
            },
          ],
        },
      ],
    });
    expect(await ask()).toStrictEqual({ decision: 'DENY', reason: 'ambiguous_config' });
    // a Flow with no required scope at all is ambiguous
    s.publishFlowVersion('marketing-email', {
      consents: [{ consentId: 'con_marketing_email', scopes: [{ scopeId: 'scp_email', required: false, combinations: [{ requirement: 'c', use: 'u' }] }] }],
    });
    expect(await ask()).toStrictEqual({ decision: 'DENY', reason: 'ambiguous_config' });
    // publishing a brand-new Flow makes it checkable
    s.publishFlowVersion('brand-new', {
      consents: [{ consentId: 'con_marketing_email', scopes: [{ scopeId: 'scp_email', required: true, combinations: [{ requirement: 'c', use: 'u' }] }] }],
    });
    expect((await check(s.url, KEY, { userReference: 'alice', configKey: 'brand-new' })).body.decision).toBe('ALLOW');
  });

  it('answers 400 to a malformed request', async () => {
    const s = await start();
    for (const body of ['{nope', '[]', JSON.stringify({ userReference: 'alice' }), JSON.stringify({ userReference: 1, configKey: 'k' })]) {
      const res = await check(s.url, KEY, body);
      expect(res.status).toBe(400);
      expect(res.body).toStrictEqual({ error: 'invalid_request' });
    }
  });

  it('answers 501 for referenced-only operations and 404 for unknown paths', async () => {
    const s = await start();
    const get = (path: string, method = 'GET') =>
      fetch(`${s.url}${path}`, { method, headers: { authorization: `Bearer ${KEY}` } });
    expect((await get('/v1/customers/cus_alice/consent-compliance')).status).toBe(501);
    expect((await get('/v1/redec/accesses/authorize', 'POST')).status).toBe(501);
    const missing = await get('/v1/nothing');
    expect(missing.status).toBe(404);
    expect(await missing.json()).toStrictEqual({ error: 'not_found' });
  });
});
