import { describe, expect, it } from 'vitest';
import { useSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { allow, deny, preDeny } from '../helpers/upstream.js';

/**
 * `POST /sidecar/authorization/check-batch` on the real sidecar in front of a scripted service:
 * each item decided as a single check, fail closed per item, in request order, one deadline.
 */
const PATH = '/sidecar/authorization/check-batch';
const fx = useSidecar();

type Item = Record<string, unknown>;
async function batch(s: TestSidecar, checks: unknown): Promise<{ status: number; results: Item[]; json: Record<string, unknown> | undefined }> {
  const r = await s.send('POST', PATH, { body: JSON.stringify({ checks }) });
  return { status: r.status, results: (r.json?.results as Item[] | undefined) ?? [], json: r.json };
}

/** The service's answer by user reference, read from the body it received. */
function byUser(table: Record<string, unknown>): (req: { body: string }) => { body: unknown; status?: number } {
  return (req) => {
    const { userReference } = JSON.parse(req.body) as { userReference: string };
    const v = table[userReference];
    return v === 500 ? { status: 500, body: {} } : { body: v };
  };
}

describe('batch check', () => {
  it('answers every item as its single check would, in request order, each with source and its own decision id', async () => {
    const until = Date.now() + 60_000;
    const { u: upstream, s: sidecar } = await fx.start(byUser({ ann: allow('k', until), bob: deny('k'), cid: preDeny('customer_not_found'), dan: 500 }), { 'breaker-failure-threshold': '1000' });
    await sidecar.check({ userReference: 'ann', configKey: 'k' }); // now cached
    const checks = ['ann', 'bob', 'cid', 'dan'].map((u) => ({ userReference: u, configKey: 'k' }));
    const r = await batch(sidecar, checks);
    expect(r.status).toBe(200);
    const stripped = r.results.map(({ decisionId: _id, ...rest }) => rest);
    expect(stripped).toEqual([
      { decision: 'ALLOW', configKey: 'k', validUntil: until, source: 'cache' },
      { decision: 'DENY', configKey: 'k', source: 'upstream' },
      { decision: 'DENY', reason: 'customer_not_found', source: 'upstream' },
      { decision: 'DENY', error: 'upstream_5xx', source: 'fail-closed' },
    ]);
    const ids = r.results.map((i) => i.decisionId);
    for (const id of ids) expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(new Set(ids).size).toBe(4);
    // Counted per item, route batch; the single check before it stays the check's.
    expect(await sidecar.metric('consent_sidecar_decisions_total', { route: 'batch' })).toBe(4);
    expect(await sidecar.metric('consent_sidecar_decisions_total', { route: 'batch', decision: 'allow', source: 'cache' })).toBe(1);
    expect(await sidecar.metric('consent_sidecar_fail_closed_total', { cause: 'upstream_5xx' })).toBe(1);
    expect(await sidecar.metric('consent_sidecar_pre_evaluation_denials_total', { reason: 'customer_not_found' })).toBe(1);
    expect(await sidecar.metric('consent_sidecar_decisions_total', { route: 'check' })).toBe(1);
  });

  it('the same request twice in one batch makes one call; distinct misses are asked together', async () => {
    let release!: () => void;
    const held = new Promise((r) => (release = () => r(undefined)));
    const { u: upstream, s: sidecar } = await fx.start(() => ({ hold: held, body: allow('k', Date.now() + 60_000) }));
    const checks = [
      { userReference: 'a', configKey: 'k' },
      { userReference: 'b', configKey: 'k' },
      { userReference: 'a', configKey: 'k' },
      { userReference: 'c', configKey: 'k' },
    ];
    const pending = batch(sidecar, checks);
    // All three distinct requests reach the service before any is answered: not one after another.
    await upstream.waitForCount(3);
    release();
    const r = await pending;
    expect(r.results.map((i) => i.decision)).toEqual(['ALLOW', 'ALLOW', 'ALLOW', 'ALLOW']);
    expect(r.results[0]!.decisionId).not.toBe(r.results[2]!.decisionId);
    expect(upstream.checks).toBe(3);
  });

  it('one deadline for the whole batch: an item the service never answers is no decision, the others keep theirs', async () => {
    const { u: upstream, s: sidecar } = await fx.start((req) => (JSON.parse(req.body).userReference === 'slow' ? { fault: 'hang' } : { body: deny('k') }), { 'upstream-timeout-ms': '300' });
    const r = await batch(sidecar, [
      { userReference: 'slow', configKey: 'k' },
      { userReference: 'quick', configKey: 'k' },
    ]);
    expect(r.status).toBe(200);
    expect(r.results.map(({ decisionId: _d, ...rest }) => rest)).toEqual([
      { decision: 'DENY', error: 'upstream_timeout', source: 'fail-closed' },
      { decision: 'DENY', configKey: 'k', source: 'upstream' },
    ]);
  });

  it('at the deadline, an item the batch never got to ask is overload (never sent), one asked and unanswered upstream_timeout', async () => {
    const { u: upstream, s: sidecar } = await fx.start({ fault: 'hang' }, { 'upstream-timeout-ms': '1000' });
    // One more distinct miss than the batch asks at once: the last waits for a call of the batch to end.
    const r = await batch(sidecar, Array.from({ length: 17 }, (_, i) => ({ userReference: `u${i}`, configKey: 'k' })));
    expect(r.results.map((i) => i.error)).toEqual([...Array(16).fill('upstream_timeout'), 'overload']);
    await upstream.waitForCount(16);
    expect(upstream.checks).toBe(16);
    expect(upstream.requests.map((q) => (JSON.parse(q.body) as { userReference: string }).userReference)).not.toContain('u16');
    expect(await sidecar.metric('consent_sidecar_fail_closed_total', { cause: 'overload' })).toBe(1);
  });

  it('an ALLOW for another configKey is no decision for that item only', async () => {
    const { u: upstream, s: sidecar } = await fx.start((req) => {
      const { userReference } = JSON.parse(req.body) as { userReference: string };
      return { body: userReference === 'odd' ? allow('other', Date.now() + 60_000) : allow('k', Date.now() + 60_000) };
    });
    const r = await batch(sidecar, [
      { userReference: 'odd', configKey: 'k' },
      { userReference: 'fine', configKey: 'k' },
    ]);
    expect(r.results.map((i) => [i.decision, i.error ?? i.configKey])).toEqual([
      ['DENY', 'contradictory_response'],
      ['ALLOW', 'k'],
    ]);
  });

  it.each([
    ['no checks member', {}, 'checks', undefined],
    ['an empty list', { checks: [] }, 'checks', undefined],
    ['101 items', { checks: Array.from({ length: 101 }, (_, i) => ({ userReference: `u${i}`, configKey: 'k' })) }, 'checks', undefined],
    ['an item that is not an object', { checks: [{ userReference: 'a', configKey: 'k' }, 'x'] }, 'checks[1]', 1],
    ['an item without configKey', { checks: [{ userReference: 'a', configKey: 'k' }, { userReference: 'b', configKey: 'k' }, { userReference: 'c' }] }, 'checks[2].configKey', 2],
    ['an item with a number as userReference', { checks: [{ userReference: 7, configKey: 'k' }] }, 'checks[0].userReference', 0],
  ])('%s: 400 naming the limit or the item, and nothing is asked', async (_name, body, field, index) => {
    const { u: upstream, s: sidecar } = await fx.start({ body: allow('k', Date.now() + 60_000) });
    const r = await sidecar.send('POST', PATH, { body: JSON.stringify(body) });
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({ decision: 'DENY', error: 'invalid_request', field });
    if (index !== undefined) expect(r.json?.index).toBe(index);
    expect(r.source).toBe('rejected');
    expect(upstream.count).toBe(0);
  });

  it.each([
    ['a repeated configKey in an item', '{"checks":[{"userReference":"a","configKey":"k"},{"userReference":"b","configKey":"no","configKey":"k"}]}', 'checks[1].configKey', 1],
    ['a repeated member deeper in an item', '{"checks":[{"userReference":"a","configKey":"k","meta":{"x":1,"x":2}}]}', 'checks[0]', 0],
    ['a repeated checks list', '{"checks":[{"userReference":"a","configKey":"no"}],"checks":[{"userReference":"a","configKey":"k"}]}', 'checks', undefined],
  ])('%s: 400 naming where, nothing is asked (JSON.parse would keep the last)', async (_name, body, field, index) => {
    const { u: upstream, s: sidecar } = await fx.start({ body: allow('k', Date.now() + 60_000) });
    const r = await sidecar.send('POST', PATH, { body });
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({ decision: 'DENY', error: 'invalid_request', field, detail: expect.stringContaining('appears more than once') });
    expect(r.json?.index).toBe(index);
    expect(upstream.count).toBe(0);
  });

  it('a refused batch is one answer: counted once as rejected on route batch, with a decision id', async () => {
    const { u: upstream, s: sidecar } = await fx.start({ body: allow('k', Date.now() + 60_000) });
    const ids = new Set<string>();
    for (const body of ['{"checks":[]}', 'not json', JSON.stringify({ checks: [{ userReference: 'a' }] }), `{"checks":[],"x":"${'y'.repeat(1_048_577)}"}`]) {
      const r = await sidecar.send('POST', PATH, { body });
      expect(r.status).toBe(400);
      expect(r.json).toMatchObject({ decision: 'DENY', error: 'invalid_request' });
      const id = r.headers['x-consent-decision-id'];
      expect(id).toMatch(/^[0-9a-f-]{36}$/);
      ids.add(id as string);
    }
    expect(ids.size).toBe(4);
    expect(await sidecar.metric('consent_sidecar_decisions_total', { route: 'batch', decision: 'deny', source: 'rejected' })).toBe(4);
    expect(await sidecar.metric('consent_sidecar_decisions_total', { route: 'batch' })).toBe(4);
    expect(upstream.count).toBe(0);
  });

  it('100 items are accepted; another method is 405', async () => {
    const { u: upstream, s: sidecar } = await fx.start({ body: deny('k') });
    const r = await batch(sidecar, Array.from({ length: 100 }, (_, i) => ({ userReference: `u${i}`, configKey: 'k' })));
    expect(r.results).toHaveLength(100);
    expect(r.results.every((i) => i.decision === 'DENY' && i.source === 'upstream')).toBe(true);
    const get = await sidecar.send('GET', PATH);
    expect(get.status).toBe(405);
    expect(get.headers.allow).toBe('POST');
  });
});
