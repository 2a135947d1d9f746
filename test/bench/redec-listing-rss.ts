/**
 * Peak RSS of a real `serve` (the build) while a fake service streams a 1 GB REDEC listing at it,
 * with default flags (issue 20 item 2): one shape after another, each on a fresh process.
 *
 * `npm run build && node --import tsx test/bench/redec-listing-rss.ts [shape…]`. BENCH_REDEC_FLOOD_BYTES
 * (default 1073741824) sets the listing's length; BENCH_REDEC_SERVE_ARGS adds flags to `serve`
 * (e.g. `--redec-max-listing-bytes 33554432`). Shapes: see test/helpers/redec-flood.ts.
 *
 * Prints, per shape: the run's outcome, what the app was handed, listing bytes the service wrote
 * and requests it got, and the process's RSS before the run and at its peak (VmHWM).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { runsOf, startCountingApp, startFloodService, startServe, type FloodShape } from '../helpers/redec-flood.js';

const TOTAL = Number(process.env.BENCH_REDEC_FLOOD_BYTES ?? 1024 ** 3);
const SHAPES: FloodShape[] = (process.argv.slice(2) as FloodShape[]).length > 0 ? (process.argv.slice(2) as FloodShape[]) : ['one-page', 'small-records', 'big-records', 'realistic'];
const MB = (n: number): string => `${(n / 1024 / 1024).toFixed(1)} MB`;

async function main(): Promise<void> {
  console.log(`REDEC listing of ${MB(TOTAL)} against a real serve with default flags, node ${process.version}`);
  console.log('shape\toutcome\thanded\tservice wrote\trequests\tRSS at start\tpeak RSS (VmHWM)');
  for (const shape of SHAPES) {
    const svc = await startFloodService(shape, TOTAL);
    const app = await startCountingApp();
    // Started against a service that is not there yet would list at once: it is there already.
    const serve = await startServe(svc.url, app.url, (process.env.BENCH_REDEC_SERVE_ARGS ?? '').split(' ').filter(Boolean));
    const atStart = serve.rssBytes();
    let outcome = '';
    for (;;) {
      const text = await serve.metrics();
      outcome = ['ok', 'too_large', 'timeout', 'network', 'malformed_page', 'cursor_loop', 'http_status', 'error'].find((o) => runsOf(text, o) > 0) ?? '';
      if (outcome) break;
      if (serve.child.exitCode !== null) {
        outcome = `exited ${serve.child.exitCode}`;
        break;
      }
      await sleep(100);
    }
    const peak = serve.child.exitCode === null ? serve.peakRssBytes() : Number.NaN;
    console.log(`${shape}\t${outcome}\t${app.received()}\t${MB(svc.written())}\t${svc.requests()}\t${MB(atStart)}\t${MB(peak)}`);
    await serve.stop();
    await app.close();
    await svc.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
