import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import type * as PromClient from 'prom-client';
import * as facade from '../../src/observability/prom.js';
import { createRegistry } from '../../src/observability/registry.js';

const index = createRequire(import.meta.url)('prom-client') as typeof PromClient;

// src/observability/prom.ts requires prom-client's classes one file each (its index also loads
// the Pushgateway and node:https): each must be the very class the index exports.
describe('prom-client, one file each', () => {
  it('the classes are the index\'s own', () => {
    for (const name of ['Registry', 'Counter', 'Gauge', 'Histogram'] as const) {
      expect(facade[name], `prom-client internal 'prom-client/lib/${name.toLowerCase()}' (src/observability/prom.ts) is not the index's ${name}`).toBe(index[name] as unknown);
    }
  });
});

// The default metrics are prom-client's, its process CPU counters apart (they require the
// OpenTelemetry API): the same families, types and help as prom-client's own collector gives.
describe('the default metrics', () => {
  const families = async (r: PromClient.Registry) => (await r.getMetricsAsJSON()).map((m) => ({ name: m.name, type: m.type, help: m.help })).sort((a, b) => a.name.localeCompare(b.name));

  it('are the families of prom-client\'s collectDefaultMetrics, with the same types and help', async () => {
    const theirs = new index.Registry();
    index.collectDefaultMetrics({ register: theirs });
    const ours = new index.Registry();
    facade.collectDefaultMetrics(ours);
    const expected = await families(theirs);
    expect(expected.map((f) => f.name)).toContain('process_cpu_seconds_total');
    expect(await families(ours)).toEqual(expected);
  });

  it('count the CPU this process spends, user plus system in the total', async () => {
    const r = createRegistry();
    const value = async (name: string): Promise<number> => (await r.getSingleMetric(name)!.get()).values[0]!.value;
    // Spend some CPU between two scrapes: the counters grow, and the total is the sum of the other two.
    await r.metrics();
    const before = await value('process_cpu_seconds_total');
    const t = process.cpuUsage();
    while (process.cpuUsage(t).user < 50_000) Math.sqrt(Math.random());
    await r.metrics();
    const [user, system, total] = await Promise.all(['process_cpu_user_seconds_total', 'process_cpu_system_seconds_total', 'process_cpu_seconds_total'].map(value));
    expect(total! - before).toBeGreaterThanOrEqual(0.05);
    expect(total!).toBeCloseTo(user! + system!, 6);
    expect(await r.metrics()).toMatch(/^# TYPE process_cpu_seconds_total counter$/m);
  });
});
