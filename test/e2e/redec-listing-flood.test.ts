import { afterEach, describe, expect, it, vi } from 'vitest';
import { runsOf, startCountingApp, startFloodService, startServe, type FloodService, type FloodShape, type ServeProcess } from '../helpers/redec-flood.js';

// Issue 20 item 2 on a real `serve` (the build), default flags: a service that answers the REDEC
// listing with a gigabyte (one endless page, or pages under the page bound holding one huge record
// each) costs the sidecar one failed run, `too_large`, and nothing handed to the app. The peak RSS
// is measured from /proc (VmHWM); the bound asserted is generous (the bench,
// test/bench/redec-listing-rss.ts, prints the numbers); before issue 20 the process died of heap
// exhaustion at several gigabytes.

const GB = 1024 ** 3;
let svc: FloodService | undefined;
let app: Awaited<ReturnType<typeof startCountingApp>> | undefined;
let serve: ServeProcess | undefined;
afterEach(async () => {
  await serve?.stop();
  await app?.close();
  await svc?.close();
  serve = app = svc = undefined;
});

describe('a 1 GB REDEC listing against a real serve', () => {
  // The cheapest shapes that cross each byte bound; the bench runs all four (the realistic one is
  // 1,001 requests of CPU for both processes, too heavy beside the rest of the suite).
  it.each<[FloodShape]>([['one-page'], ['big-records']])(
    '%s: the run fails too_large, counted and logged once, nothing is handed, and the sidecar never holds the listing',
    async (shape) => {
      svc = await startFloodService(shape, GB);
      app = await startCountingApp();
      serve = await startServe(svc.url, app.url);
      await vi.waitFor(async () => expect(runsOf(await serve!.metrics(), 'too_large')).toBe(1), { timeout: 90_000, interval: 100 });
      expect(app.received()).toBe(0);
      // The sidecar stopped reading long before the gigabyte: what the service managed to write
      // (what the sidecar read plus what sat in socket buffers) is a small part of it.
      expect(svc.written()).toBeLessThan(GB / 8);
      expect(serve.peakRssBytes()).toBeLessThan(400 * 1024 * 1024);
      const runs = serve.lines().filter((l) => l.event === 'redec_reconcile_run');
      expect(runs).toEqual([expect.objectContaining({ outcome: 'too_large', code: 'ERR_REDEC_TOO_LARGE' })]);
      expect(serve.child.exitCode).toBeNull();
    },
    120_000,
  );
});
