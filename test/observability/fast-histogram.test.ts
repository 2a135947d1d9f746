import fc from 'fast-check';
import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { DECISION_DURATION_BUCKETS_S } from '../../src/decision/metrics.js';
import { FastHistogram } from '../../src/observability/index.js';

const SOURCES = ['cache', 'upstream', 'fail_closed', 'rejected'] as const;
const NAME = 'consent_sidecar_decision_duration_seconds';
const HELP = 'help text';

/** The same observations into a FastHistogram and a prom-client Histogram, each in its own registry. */
async function both(observations: readonly (readonly [number, number])[]): Promise<{ fast: Registry; reference: Registry }> {
  const fast = new Registry();
  const reference = new Registry();
  const f = new FastHistogram(NAME, HELP, 'source', SOURCES, DECISION_DURATION_BUCKETS_S, fast);
  const h = new Histogram({ name: NAME, help: HELP, labelNames: ['source'], buckets: [...DECISION_DURATION_BUCKETS_S], registers: [reference] });
  for (const s of SOURCES) h.zero({ source: s });
  for (const [i, v] of observations) {
    f.observe(i, v);
    h.observe({ source: SOURCES[i]! }, v);
  }
  return { fast, reference };
}

describe('FastHistogram', () => {
  it('exposes byte for byte what prom-client exposes for the same observations (text and JSON)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.integer({ min: 0, max: SOURCES.length - 1 }), fc.oneof(fc.double({ min: 0, max: 10, noNaN: true }), fc.constantFrom(...DECISION_DURATION_BUCKETS_S))), {
          maxLength: 200,
        }),
        async (observations) => {
          const { fast, reference } = await both(observations);
          expect(await fast.metrics(), 'prom-client internal: the registry reads a metric it did not make (src/observability/fast-histogram.ts: registerMetric, name, help, type, aggregator, get())').toBe(await reference.metrics());
          expect(await fast.getMetricsAsJSON()).toEqual(await reference.getMetricsAsJSON());
        },
      ),
      { numRuns: 100 },
    );
  });

  it('the comparison can fail: one observation more on one side shows', async () => {
    const { fast, reference } = await both([[0, 0.0002]]);
    (fast.getSingleMetric(NAME) as unknown as FastHistogram<string>).observe(1, 0.3);
    expect(await fast.metrics()).not.toBe(await reference.metrics());
  });

  it('refuses a label value it was not declared with', () => {
    const f = new FastHistogram(NAME, HELP, 'source', SOURCES, [1], new Registry());
    expect(() => f.indexOf('other' as never)).toThrow(/not a declared value/);
  });
});
