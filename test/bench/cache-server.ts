/**
 * A sidecar whose ALLOW cache was filled with N entries before it started (as N misses would, in
 * far less time): `cache-server.ts <entries> <upstreamUrl> <decisionPort> <adminPort>`. Entries
 * are userReference `user-<10 digits>` and configKey `cfg-<11 digits>` (15 + 15 characters).
 * Prints `ready` once listening; on SIGUSR1 (then starting over) and on SIGTERM prints the event loop's longest stall (ms, from
 * perf_hooks' monitorEventLoopDelay, 1 ms resolution) as `stall <ms>`, and the longest stall spent
 * working (`busy <ms>`: for each gap between 1 ms ticks, the smaller of the wall-clock gap and the
 * CPU time the process used in it, so time the OS gave to other processes does not count). SIGUSR2
 * starts over without printing.
 */
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { loadServeConfig } from '../../src/config/index.js';
import { AllowCache, cacheKey } from '../../src/decision/index.js';
import { silentLogger } from '../../src/observability/index.js';
import { startSidecar } from '../../src/assembly/sidecar.js';
import { allowedFor } from '../helpers/allowed.js';

export const userOf = (i: number): string => `user-${String(i).padStart(10, '0')}`;
export const configOf = (i: number): string => `cfg-${String(i % 1000).padStart(11, '0')}`;

// Run as a server only when it is the program (run.ts imports it for userOf and configOf, with
// arguments of its own: `npm run bench -- fleet`).
const [entriesText, upstreamUrl, port, admin] = process.argv.slice(2);
if (process.argv[1] === fileURLToPath(import.meta.url) && entriesText !== undefined) {
  const entries = Number(entriesText);
  const config = loadServeConfig(
    { 'upstream-url': upstreamUrl!, 'api-key': 'bench-key', listen: `127.0.0.1:${port}`, 'admin-listen': `127.0.0.1:${admin}`, 'cache-max-entries': String(Math.max(entries, 1000)) },
    {},
  );
  const cache = new AllowCache(config.cache);
  const now = Date.now();
  for (let i = 0; i < entries; i++) {
    const u = userOf(i);
    const k = configOf(i);
    cache.setAllow(cacheKey({ userReference: u, configKey: k }), u, allowedFor(k, now + 3_600_000, now, cache.sharedConfigKey(k)), now + 3_000_000, cache.generation);
  }
  (globalThis as { gc?: () => void }).gc?.();
  await startSidecar(config, { logger: silentLogger(), cache });
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  let busyMax = 0;
  let lastWall = performance.now();
  let lastCpu = process.cpuUsage();
  setInterval(() => {
    const wall = performance.now();
    const cpu = process.cpuUsage();
    const cpuMs = (cpu.user - lastCpu.user + cpu.system - lastCpu.system) / 1000;
    busyMax = Math.max(busyMax, Math.min(wall - lastWall, cpuMs));
    lastWall = wall;
    lastCpu = cpu;
  }, 1);
  process.stdout.write('ready\n');
  const report = (): void => {
    process.stdout.write(`stall ${(h.max / 1e6).toFixed(1)} busy ${busyMax.toFixed(1)}\n`);
  };
  const reset = (): void => {
    h.reset();
    busyMax = 0;
  };
  process.on('SIGUSR2', reset);
  // The phase so far, then a new phase (the bench reads scraping and purging apart).
  process.on('SIGUSR1', () => {
    report();
    reset();
  });
  process.on('SIGTERM', () => {
    h.disable();
    report();
    process.exit(0);
  });
}
