import { afterEach, describe, expect, it, vi } from 'vitest';
import { capturingLogger, testClock } from '../helpers/sidecar.js';
import { metricValue, startApp, type FakeApp } from '../helpers/webhooks.js';
import { json, reconcilerFor, scriptedService, upstreamOf, type ReconcilerUnderTest } from '../helpers/redec.js';

/**
 * A service whose page names its records `obligations` (no `items`) and reads its cursor from
 * `after`: the field names the document does not show, other than the simulator's.
 */
const RECORDS = Array.from({ length: 7 }, (_, i) => ({ obligationId: `obl_${i}`, consent: `rdc_${i}`, pending: true }));

let svc: Awaited<ReturnType<typeof scriptedService>> | undefined;
let app: FakeApp | undefined;
let under: ReconcilerUnderTest | undefined;
afterEach(async () => {
  await under?.close();
  await svc?.close();
  await app?.close();
  svc = app = under = undefined;
});

/** Pages of 3 from `records`; `fault(pageIndex)` may answer instead. */
function pager(records: () => readonly object[], fault: (page: number) => ((res: import('node:http').ServerResponse) => void) | undefined = () => undefined) {
  return (url: URL, _req: unknown, res: import('node:http').ServerResponse): void => {
    const after = url.searchParams.get('after');
    const page = after === null ? 0 : Number(after.slice('p'.length));
    const f = fault(page);
    if (f) return f(res);
    const all = records();
    const slice = all.slice(page * 3, page * 3 + 3);
    json(res, 200, { total: all.length, obligations: slice, nextCursor: (page + 1) * 3 < all.length ? `p${page + 1}` : null });
  };
}

describe('REDEC reconciler against a service with other field names', () => {
  it('finds the only array of objects, sends the cursor as the configured parameter, and says which field it used once', async () => {
    svc = await scriptedService(pager(() => RECORDS));
    app = await startApp();
    const clock = testClock();
    const { logger, lines } = capturingLogger();
    under = reconcilerFor({ upstream: upstreamOf(svc.url, 'k'), appUrl: app.url, now: clock.now, logger, graceMs: 0, fields: { itemsField: null, cursorParam: 'after' } });
    expect(await under.reconciler.runOnce()).toBe('ok');
    expect(await metricValue(under.registry, 'consent_sidecar_redec_pending_obligations')).toBe(7);
    expect(svc.requests.map((u) => u.searchParams.get('after'))).toEqual([null, 'p1', 'p2']);
    expect(svc.requests.every((u) => u.searchParams.get('status') === 'pending' && u.searchParams.get('cursor') === null)).toBe(true);
    expect(app.received.map((r) => (JSON.parse(r.body.toString()) as { data: unknown }).data)).toEqual(RECORDS);
    await under.reconciler.runOnce();
    expect(app.received).toHaveLength(7);
    const said = lines().filter((l) => l.event === 'redec_listing_fields');
    expect(said).toEqual([expect.objectContaining({ itemsField: 'obligations', cursorParam: 'after', configured: false })]);
  });

  it('reads a configured items field even when the page holds other arrays of objects', async () => {
    svc = await scriptedService((url, _req, res) => json(res, 200, { links: [{ rel: 'self' }], obligations: RECORDS.slice(0, 2), nextCursor: null }));
    const clock = testClock();
    const unset = reconcilerFor({ upstream: upstreamOf(svc.url, 'k'), appUrl: null, now: clock.now, logger: capturingLogger().logger });
    expect(await unset.reconciler.runOnce()).toBe('malformed_page'); // two arrays of objects: no guessing
    await unset.close();
    under = reconcilerFor({ upstream: upstreamOf(svc.url, 'k'), appUrl: null, now: clock.now, logger: capturingLogger().logger, fields: { itemsField: 'obligations', cursorParam: 'after' } });
    expect(await under.reconciler.runOnce()).toBe('ok');
    expect(await metricValue(under.registry, 'consent_sidecar_redec_pending_obligations')).toBe(2);
  });

  it.each([
    ['a failing page (HTTP 500)', 'http_status', (res: import('node:http').ServerResponse) => json(res, 500, { error: 'boom' })],
    ['a malformed page', 'malformed_page', (res: import('node:http').ServerResponse) => json(res, 200, '{"obligations": [1, 2], "nextCursor": null}')],
    ['a page that is not JSON', 'malformed_page', (res: import('node:http').ServerResponse) => json(res, 200, '<html>')],
    ['a cursor seen twice', 'cursor_loop', (res: import('node:http').ServerResponse) => json(res, 200, { obligations: [], nextCursor: 'p1' })],
    ['a page that never answers', 'timeout', () => undefined],
    ['a reset connection', 'network', (res: import('node:http').ServerResponse) => res.socket?.destroy()],
  ] as const)('%s fails the run (%s), counted and logged, forgets nothing; the next run starts over and recovers', async (_name, outcome, answer) => {
    let broken = false;
    svc = await scriptedService(pager(() => RECORDS, (page) => (page === 2 && broken ? answer : undefined)));
    app = await startApp();
    const clock = testClock();
    const { logger, lines } = capturingLogger();
    // The runs that must be 'ok' race this deadline too: 300 ms was lost to a busy machine. Only the
    // page that never answers waits it out.
    under = reconcilerFor({ upstream: upstreamOf(svc.url, 'k', 5000), appUrl: app.url, now: clock.now, logger, graceMs: 1000, fields: { itemsField: null, cursorParam: 'after' } });
    expect(await under.reconciler.runOnce()).toBe('ok');
    clock.advance(1000);
    broken = true;
    expect(await under.reconciler.runOnce()).toBe(outcome);
    expect(await metricValue(under.registry, 'consent_sidecar_redec_reconcile_runs_total', { outcome })).toBe(1);
    expect(lines().filter((l) => l.event === 'redec_reconcile_run' && l.outcome === outcome)).toHaveLength(1);
    // Nothing was handed from a partial listing, and the gauge still says the last complete one.
    expect(app.received).toHaveLength(0);
    expect(await metricValue(under.registry, 'consent_sidecar_redec_pending_obligations')).toBe(7);
    broken = false;
    expect(await under.reconciler.runOnce()).toBe('ok');
    // First-seen times survived the failed run: all are past the grace now and handed once.
    expect(app.received).toHaveLength(7);
    const requestsBefore = svc.requests.length;
    await under.reconciler.runOnce();
    expect(svc.requests.length - requestsBefore).toBe(3); // the next run starts from the first page
    expect(svc.requests[requestsBefore]!.searchParams.get('after')).toBeNull();
  });

  it('obligations that left the listing are forgotten: one that comes back starts its grace again', async () => {
    let records: readonly object[] = RECORDS;
    svc = await scriptedService(pager(() => records));
    app = await startApp();
    const clock = testClock();
    under = reconcilerFor({ upstream: upstreamOf(svc.url, 'k'), appUrl: app.url, now: clock.now, logger: capturingLogger().logger, graceMs: 1000, fields: { itemsField: null, cursorParam: 'after' } });
    await under.reconciler.runOnce();
    records = RECORDS.slice(1);
    clock.advance(500);
    await under.reconciler.runOnce();
    expect(await metricValue(under.registry, 'consent_sidecar_redec_pending_obligations')).toBe(6);
    records = RECORDS;
    clock.advance(500);
    await under.reconciler.runOnce();
    // The six seen 1000 ms ago are due; the one that came back was first seen just now.
    expect(app.received).toHaveLength(6);
    expect(app.received.map((r) => (JSON.parse(r.body.toString()) as { data: { obligationId: string } }).data.obligationId)).not.toContain('obl_0');
  });

  it('stopping the sidecar during a page that never answers ends the run without counting a failure', async () => {
    svc = await scriptedService(() => undefined);
    const { logger, lines } = capturingLogger();
    under = reconcilerFor({ upstream: upstreamOf(svc.url, 'k', 600_000), appUrl: null, now: testClock().now, logger });
    const run = under.reconciler.runOnce();
    await vi.waitFor(() => expect(svc!.requests).toHaveLength(1), { timeout: 10_000, interval: 10 });
    await under.close();
    const registry = under.registry;
    under = undefined;
    await run;
    expect(await metricValue(registry, 'consent_sidecar_redec_reconcile_runs_total')).toBe(0);
    expect(lines().filter((l) => l.event === 'redec_reconcile_run')).toEqual([]);
  });
});
