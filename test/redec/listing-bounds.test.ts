import type { ServerResponse } from 'node:http';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ConfigError, loadServeConfig, resolveRedecListingBounds, type RedecListingBounds } from '../../src/config/index.js';
import { listNotificationRequirements, RedecError } from '../../src/redec/index.js';
import { capturingLogger, testClock } from '../helpers/sidecar.js';
import { configProblems } from '../helpers/config.js';
import { metricValue, startApp, type FakeApp } from '../helpers/webhooks.js';
import { json, reconcilerFor, scriptedService, upstreamOf, type ReconcilerUnderTest } from '../helpers/redec.js';

// Issue 20 item 2: a REDEC listing can no longer kill the sidecar. A page is read with a byte bound
// (cut off past it, never buffered beyond), records and bytes are counted across the listing, and a
// run past any bound fails `too_large`, counted and logged once, with nothing of it handed to the app.
// A run holds identities, and the records' text only up to the page bound: past it, what is due is
// handed from a second listing, page by page.

let svc: Awaited<ReturnType<typeof scriptedService>> | undefined;
let app: FakeApp | undefined;
let under: ReconcilerUnderTest | undefined;
afterEach(async () => {
  await under?.close();
  await svc?.close();
  await app?.close();
  svc = app = under = undefined;
});

const BOUNDS: RedecListingBounds = { maxPageBytes: 64 * 1024, maxRecords: 5, maxListingBytes: 1024 * 1024 };
const record = (i: number): Record<string, unknown> => ({ id: `nrq_${i}`, redecConsentId: `rdc_${i}`, status: 'pending' });

/** A page that never ends: `{"items":[` then records, written as fast as the client reads, until it goes away. */
function endlessPage(res: ServerResponse, stats: { written: number; closed: boolean }, declared?: number): void {
  res.writeHead(200, { 'content-type': 'application/json', ...(declared === undefined ? {} : { 'content-length': String(declared) }) });
  res.on('close', () => (stats.closed = true));
  let i = 0;
  const chunk = (): string => {
    let s = i === 0 ? '{"items":[' : '';
    for (let n = 0; n < 200; n++, i++) s += `${i === 0 ? '' : ','}${JSON.stringify(record(i))}`;
    return s;
  };
  const pump = (): void => {
    while (!res.destroyed) {
      const c = chunk();
      stats.written += c.length;
      if (!res.write(c)) {
        res.once('drain', pump);
        return;
      }
    }
  };
  pump();
}

describe('REDEC listing bounds: the reconciler', () => {
  it('a page that never ends is cut off past --redec-max-page-bytes: too_large, counted, logged once, nothing handed', async () => {
    const stats = { written: 0, closed: false };
    svc = await scriptedService((_url, _req, res) => endlessPage(res, stats));
    app = await startApp();
    const { logger, lines } = capturingLogger();
    under = reconcilerFor({ upstream: upstreamOf(svc.url, 'k', 60_000), appUrl: app.url, now: testClock().now, logger, graceMs: 0, bounds: BOUNDS });
    expect(await under.reconciler.runOnce()).toBe('too_large');
    expect(await metricValue(under.registry, 'consent_sidecar_redec_reconcile_runs_total', { outcome: 'too_large' })).toBe(1);
    const failed = lines().filter((l) => l.event === 'redec_reconcile_run');
    expect(failed).toEqual([expect.objectContaining({ outcome: 'too_large', code: 'ERR_REDEC_TOO_LARGE', level: 'warn' })]);
    expect(String(failed[0]!.msg)).toContain('--redec-max-page-bytes');
    expect(app.received).toHaveLength(0);
    // The sidecar went away: the service saw its connection closed while still writing.
    await vi.waitFor(() => expect(stats.closed).toBe(true));
    expect(await metricValue(under.registry, 'consent_sidecar_redec_pending_obligations')).toBe(0);
  });

  it('a page that announces more than the bound is not read at all', async () => {
    const stats = { written: 0, closed: false };
    svc = await scriptedService((_url, _req, res) => endlessPage(res, stats, 1024 * 1024 * 1024));
    under = reconcilerFor({ upstream: upstreamOf(svc.url, 'k', 60_000), appUrl: null, now: testClock().now, logger: capturingLogger().logger, bounds: BOUNDS });
    expect(await under.reconciler.runOnce()).toBe('too_large');
    await vi.waitFor(() => expect(stats.closed).toBe(true));
  });

  it('records are counted across pages: one more than --redec-max-records fails the run and nothing of it is handed or remembered', async () => {
    let total = 6;
    // Pages of 2 records, following the cursor.
    svc = await scriptedService((url, _req, res) => {
      const page = Number(url.searchParams.get('cursor') ?? '0');
      const items = Array.from({ length: total }, (_, i) => record(i)).slice(page * 2, page * 2 + 2);
      json(res, 200, { items, nextCursor: (page + 1) * 2 < total ? String(page + 1) : null });
    });
    app = await startApp();
    const clock = testClock();
    const { logger, lines } = capturingLogger();
    under = reconcilerFor({ upstream: upstreamOf(svc.url, 'k'), appUrl: app.url, now: clock.now, logger, graceMs: 0, bounds: BOUNDS });
    expect(await under.reconciler.runOnce()).toBe('too_large');
    expect(app.received).toHaveLength(0);
    expect(await metricValue(under.registry, 'consent_sidecar_redec_pending_obligations')).toBe(0);
    expect(lines().filter((l) => l.event === 'redec_reconcile_run' && l.outcome === 'too_large')).toHaveLength(1);
    expect(String(lines().find((l) => l.outcome === 'too_large')!.msg)).toContain('--redec-max-records');
    // Exactly at the bound is a listing like any other: all five handed (grace 0).
    total = 5;
    expect(await under.reconciler.runOnce()).toBe('ok');
    expect(app.received).toHaveLength(5);
    expect(await metricValue(under.registry, 'consent_sidecar_redec_reconcile_runs_total', { outcome: 'too_large' })).toBe(1);
  });

  it('bytes are counted across pages: pages each under the page bound but together over --redec-max-listing-bytes fail the run', async () => {
    // Few records, each large: the records bound alone would let a listing run to gigabytes.
    const big = 'x'.repeat(40 * 1024);
    svc = await scriptedService((url, _req, res) => {
      const page = Number(url.searchParams.get('cursor') ?? '0');
      json(res, 200, { items: [{ id: `nrq_${page}`, blob: big }], nextCursor: String(page + 1) });
    });
    app = await startApp();
    const { logger, lines } = capturingLogger();
    under = reconcilerFor({ upstream: upstreamOf(svc.url, 'k'), appUrl: app.url, now: testClock().now, logger, graceMs: 0, bounds: { ...BOUNDS, maxRecords: 100_000, maxListingBytes: 256 * 1024 } });
    expect(await under.reconciler.runOnce()).toBe('too_large');
    expect(svc.requests.length).toBeLessThanOrEqual(7);
    expect(app.received).toHaveLength(0);
    expect(String(lines().find((l) => l.outcome === 'too_large')!.msg)).toContain('--redec-max-listing-bytes');
  });

  it('records that do not fit in the page bound together are held as identities: the due ones are handed from a second listing', async () => {
    // Three pages of one 40 KiB record each: each page is under the bound, the three are not.
    const blob = (i: number): string => String(i).repeat(40 * 1024);
    const listed = [0, 1, 2].map((i) => ({ id: `nrq_${i}`, blob: blob(i) }));
    svc = await scriptedService((url, _req, res) => {
      const page = Number(url.searchParams.get('cursor') ?? '0');
      json(res, 200, { items: [listed[page]], nextCursor: page < 2 ? String(page + 1) : null });
    });
    app = await startApp();
    const clock = testClock();
    under = reconcilerFor({ upstream: upstreamOf(svc.url, 'k'), appUrl: app.url, now: clock.now, logger: capturingLogger().logger, graceMs: 1000, bounds: BOUNDS });
    expect(await under.reconciler.runOnce()).toBe('ok');
    expect(svc.requests).toHaveLength(3); // nothing due yet: one listing
    expect(await metricValue(under.registry, 'consent_sidecar_redec_pending_obligations')).toBe(3);
    clock.advance(1000);
    expect(await under.reconciler.runOnce()).toBe('ok');
    expect(svc.requests).toHaveLength(9); // a listing, then another for the records themselves
    expect(app.received.map((r) => (JSON.parse(r.body.toString()) as { id: string; data: unknown }).data)).toEqual(listed);
  });

  it('a record whose id is absurdly long is known by a hash of it: a run does not hold it twice, the event id stays short', async () => {
    const long = { id: 'n'.repeat(100_000), status: 'pending' };
    svc = await scriptedService((_url, _req, res) => json(res, 200, { items: [long], nextCursor: null }));
    app = await startApp();
    under = reconcilerFor({ upstream: upstreamOf(svc.url, 'k'), appUrl: app.url, now: testClock().now, logger: capturingLogger().logger, graceMs: 0, bounds: { ...BOUNDS, maxPageBytes: 1024 * 1024 } });
    expect(await under.reconciler.runOnce()).toBe('ok');
    const handed = JSON.parse(app.received[0]!.body.toString()) as { id: string; data: unknown };
    expect(handed.id).toMatch(/^reconcile_[0-9a-f]{32}$/);
    expect(handed.data).toEqual(long);
  });
});

describe('REDEC listing bounds: the listing itself (what redec pending uses)', () => {
  it('yields nothing of the page that crosses the records bound', async () => {
    svc = await scriptedService((_url, _req, res) => json(res, 200, { items: [record(1), record(2), record(3), record(4), record(5), record(6)], nextCursor: null }));
    const pages: unknown[] = [];
    const err = await (async () => {
      for await (const page of listNotificationRequirements(upstreamOf(svc!.url, 'k'), { bounds: BOUNDS })) pages.push(page);
    })().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RedecError);
    expect(err).toMatchObject({ code: 'ERR_REDEC_TOO_LARGE', bound: 'records' });
    expect(pages).toEqual([]);
  });
});

describe('REDEC listing bounds: flags', () => {
  // The reconciler on (an explicit interval: without --app-webhook-url it is off by default).
  const BASE = { 'upstream-url': 'http://127.0.0.1:7800', 'api-key': 'k', 'redec-reconcile-interval-ms': '300000' };

  it('defaults 8388608 bytes a page, 100000 records and 67108864 bytes a listing; flags win over variables', () => {
    expect(loadServeConfig(BASE, {}).redecReconcile?.bounds).toEqual({ maxPageBytes: 8_388_608, maxRecords: 100_000, maxListingBytes: 67_108_864 });
    const c = loadServeConfig({ ...BASE, 'redec-max-records': '7' }, {
      CONSENT_SIDECAR_REDEC_MAX_RECORDS: '9',
      CONSENT_SIDECAR_REDEC_MAX_PAGE_BYTES: '65536',
      CONSENT_SIDECAR_REDEC_MAX_LISTING_BYTES: '131072',
    });
    expect(c.redecReconcile?.bounds).toEqual({ maxPageBytes: 65_536, maxRecords: 7, maxListingBytes: 131_072 });
    expect(resolveRedecListingBounds({}, { CONSENT_SIDECAR_REDEC_MAX_RECORDS: '3' })).toMatchObject({ maxRecords: 3 });
  });

  it.each([
    [{ 'redec-max-page-bytes': '0' }, '--redec-max-page-bytes'],
    [{ 'redec-max-page-bytes': '8MB' }, '--redec-max-page-bytes'],
    [{ 'redec-max-records': '0' }, '--redec-max-records'],
    [{ 'redec-max-records': '-1' }, '--redec-max-records'],
    [{ 'redec-max-page-bytes': '100' }, '--redec-max-page-bytes'],
    [{ 'redec-max-listing-bytes': 'lots' }, '--redec-max-listing-bytes'],
    [{ 'redec-max-listing-bytes': '65536' }, '--redec-max-listing-bytes'],
  ])('%j is refused naming %s', (flags, flag) => {
    const p = configProblems({ ...BASE, ...flags });
    expect(p).toHaveLength(1);
    expect(p[0]).toMatch(new RegExp(`^${flag}\\b`));
    expect(() => resolveRedecListingBounds(flags, {})).toThrow(ConfigError);
  });
});
