import { createRequire } from 'node:module';
import type * as PromClient from 'prom-client';

/**
 * prom-client's classes, required one file each. Its index also loads the Pushgateway (node:https,
 * TLS) and the cluster aggregator, which a sidecar never uses: about 5 MiB of RSS a pod would pay
 * for nothing (docs/performance.md, Footprint). The paths are pinned by prom-client's version in
 * package-lock.json, and test/observability/prom.test.ts holds each to be the very class the index
 * exports, so an upgrade that moves one fails the suite instead of the sidecar.
 */
const req = createRequire(import.meta.url);

export const Registry = req('prom-client/lib/registry') as typeof PromClient.Registry;
export const Counter = req('prom-client/lib/counter') as typeof PromClient.Counter;
export const Gauge = req('prom-client/lib/gauge') as typeof PromClient.Gauge;
export const Histogram = req('prom-client/lib/histogram') as typeof PromClient.Histogram;

type DefaultMetric = (registry: PromClient.Registry, config: { eventLoopMonitoringPrecision: number }) => void;

/**
 * prom-client's default metrics but its process CPU counters, which require the OpenTelemetry API
 * (for exemplars the sidecar does not enable): 51 modules and about 5 MiB a pod would pay with
 * tracing off. {@link registerProcessCpu} gives the same three families. Literal paths, one each,
 * so the bundler sees every file.
 */
const DEFAULTS_BUT_CPU = (): DefaultMetric[] => [
  req('prom-client/lib/metrics/processStartTime'),
  req('prom-client/lib/metrics/osMemoryHeap'),
  req('prom-client/lib/metrics/processOpenFileDescriptors'),
  req('prom-client/lib/metrics/processMaxFileDescriptors'),
  req('prom-client/lib/metrics/eventLoopLag'),
  req('prom-client/lib/metrics/processResources'),
  req('prom-client/lib/metrics/processHandles'),
  req('prom-client/lib/metrics/processRequests'),
  req('prom-client/lib/metrics/heapSizeAndUsed'),
  req('prom-client/lib/metrics/heapSpacesSizeAndUsed'),
  req('prom-client/lib/metrics/version'),
  req('prom-client/lib/metrics/gc'),
] as DefaultMetric[];

/** prom-client's `collectDefaultMetrics({ register })`, process CPU counters of our own (same names, help and values). */
export function collectDefaultMetrics(registry: PromClient.Registry): void {
  registerProcessCpu(registry);
  for (const metric of DEFAULTS_BUT_CPU()) metric(registry, { eventLoopMonitoringPrecision: 10 });
}

/** `process_cpu_user_seconds_total`, `process_cpu_system_seconds_total` and `process_cpu_seconds_total`, as prom-client has them. */
export function registerProcessCpu(registry: PromClient.Registry): void {
  let last = process.cpuUsage();
  const registers = [registry];
  const user = new Counter({
    name: 'process_cpu_user_seconds_total',
    help: 'Total user CPU time spent in seconds.',
    registers,
    // One collect sets all three, from one reading.
    collect() {
      const now = process.cpuUsage();
      const u = now.user - last.user;
      const s = now.system - last.system;
      last = now;
      user.inc(u / 1e6);
      system.inc(s / 1e6);
      total.inc((u + s) / 1e6);
    },
  });
  const system = new Counter({ name: 'process_cpu_system_seconds_total', help: 'Total system CPU time spent in seconds.', registers });
  const total = new Counter({ name: 'process_cpu_seconds_total', help: 'Total user and system CPU time spent in seconds.', registers });
}
export type Registry = PromClient.Registry;
export type Counter<T extends string = string> = PromClient.Counter<T>;
export type Gauge<T extends string = string> = PromClient.Gauge<T>;
export type Histogram<T extends string = string> = PromClient.Histogram<T>;
