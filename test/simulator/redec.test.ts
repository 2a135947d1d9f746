import { afterEach, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatorHandle } from '../../src/simulator/index.js';

const KEY = 'k_redec';
let sim: SimulatorHandle | undefined;
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

async function get(path: string, key = KEY): Promise<{ status: number; body: any }> {
  const res = await fetch(`${sim!.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
  return { status: res.status, body: await res.json() };
}

async function post(path: string, body: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${sim!.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

/** Makes 5 tenant obligations (grant/revoke of credit-report) and 2 service ones (open-finance). */
function makeObligations(s: SimulatorHandle): void {
  s.revokeConsent({ userReference: 'alice', configKey: 'credit-report' });
  s.grantConsent({ userReference: 'bob', configKey: 'credit-report' });
  s.grantConsent({ userReference: 'bob', configKey: 'open-finance' });
  s.revokeConsent({ userReference: 'bob', configKey: 'credit-report' });
  s.revokeConsent({ userReference: 'alice', configKey: 'open-finance' });
  s.grantConsent({ userReference: 'carol', configKey: 'credit-report' });
  s.grantConsent({ userReference: 'dave', configKey: 'credit-report' });
}

describe('GET /v1/redec/notification-requirements', () => {
  it('requires the key', async () => {
    sim = await startSimulator({ apiKey: KEY });
    expect((await get('/v1/redec/notification-requirements?status=pending', 'bad')).status).toBe(401);
  });

  it('pages deterministically with limit and nextCursor until null', async () => {
    sim = await startSimulator({ apiKey: KEY });
    makeObligations(sim);
    const all: any[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const q: string = `/v1/redec/notification-requirements?status=pending&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
      const { status, body } = await get(q);
      expect(status).toBe(200);
      expect(Object.keys(body).sort()).toEqual(['items', 'nextCursor']);
      all.push(...body.items);
      cursor = body.nextCursor;
      pages += 1;
    } while (cursor !== null);
    expect(pages).toBe(3);
    expect(all.map((r) => [r.customerTenantId, r.notificationReason])).toEqual([
      ['alice', 'revoke'],
      ['bob', 'grant'],
      ['bob', 'revoke'],
      ['carol', 'grant'],
      ['dave', 'grant'],
    ]);
    for (const r of all) expect(r).toMatchObject({ status: 'pending', deliveryResponsibility: 'tenant' });
    // the same query gives the same first page
    const again = await get('/v1/redec/notification-requirements?status=pending&limit=2');
    expect(again.body.items).toEqual(all.slice(0, 2));
    // service obligations are not pending
    const served = await get('/v1/redec/notification-requirements?status=sent_by_service');
    expect(served.body.items).toHaveLength(2);
  });

  it('does not shift the next page when an item changes status between pages', async () => {
    sim = await startSimulator({ apiKey: KEY });
    makeObligations(sim);
    const first = await get('/v1/redec/notification-requirements?status=pending&limit=2');
    await post(`/v1/redec/consents/${first.body.items[0].redecConsentId}/notification-evidence`, { notificationReason: 'revoke' });
    const second = await get(`/v1/redec/notification-requirements?status=pending&limit=2&cursor=${first.body.nextCursor}`);
    expect(second.body.items.map((r: any) => r.customerTenantId)).toEqual(['bob', 'carol']);
  });

  it.each([
    ['status=bogus', 'status'],
    ['limit=0', 'limit'],
    ['limit=abc', 'limit'],
    ['limit=501', 'limit'],
    ['cursor=bm9wZQ', 'cursor'],
  ])('answers 400 to %s', async (query, field) => {
    sim = await startSimulator({ apiKey: KEY });
    const { status, body } = await get(`/v1/redec/notification-requirements?${query}`);
    expect(status).toBe(400);
    expect(body.error).toBe('ERR_SIMULATOR_INVALID_INPUT');
    expect(body.problems[0]).toMatch(new RegExp(`^${field}:`));
  });
});

describe('POST /v1/redec/consents/{id}/notification-evidence', () => {
  it('resolves a pending tenant obligation, then conflicts; unknown ids are 404', async () => {
    sim = await startSimulator({ apiKey: KEY });
    const { events } = sim.grantConsent({ userReference: 'bob', configKey: 'credit-report' });
    const redecConsentId = events[1]!.data.redec_consent_id as string;
    const first = await post(`/v1/redec/consents/${redecConsentId}/notification-evidence`, {});
    expect(first.status).toBe(200);
    expect(first.body.resolved).toEqual([expect.objectContaining({ redecConsentId, status: 'evidence_registered' })]);
    expect(sim.notificationRequirements({ status: 'pending' }).items).toEqual([]);
    expect((await post(`/v1/redec/consents/${redecConsentId}/notification-evidence`, {})).status).toBe(409);
    expect((await post('/v1/redec/consents/rdc_unknown/notification-evidence', {})).status).toBe(404);
  });

  it('gives a fixture grant an id, so revoking it raises an obligation with that id', async () => {
    sim = await startSimulator({ apiKey: KEY });
    const { events } = sim.revokeConsent({ userReference: 'alice', configKey: 'credit-report' });
    expect(events.map((e) => e.type)).toEqual(['consent_action.created', 'redec.notification.required']);
    expect(sim.notificationRequirements({ status: 'pending' }).items[0]!.redecConsentId).toBe(events[1]!.data.redec_consent_id);
  });
});
