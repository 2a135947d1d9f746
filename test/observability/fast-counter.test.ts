import fc from 'fast-check';
import { Counter, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { FastCounter } from '../../src/observability/index.js';

const NAME = 'consent_sidecar_decisions_total';
const HELP = 'help text';
const LABELS = ['decision', 'source', 'route'];
const SERIES = [
  ['allow', 'cache', 'check'],
  ['allow', 'upstream', 'forward_auth'],
  ['deny', 'fail_closed', 'check'],
  ['deny', 'rejected', 'check'],
];

/** The same increments into a FastCounter and a prom-client Counter (every series zeroed first), each in its own registry. */
function both(increments: readonly (readonly [number, number])[]): { fast: Registry; reference: Registry; f: FastCounter } {
  const fast = new Registry();
  const reference = new Registry();
  const f = new FastCounter(NAME, HELP, LABELS, SERIES, fast);
  const c = new Counter({ name: NAME, help: HELP, labelNames: LABELS, registers: [reference] });
  const labelsOf = (i: number) => Object.fromEntries(LABELS.map((n, j) => [n, SERIES[i]![j]!]));
  SERIES.forEach((_, i) => c.labels(labelsOf(i)).inc(0));
  for (const [i, n] of increments) {
    f.inc(i, n);
    c.inc(labelsOf(i), n);
  }
  return { fast, reference, f };
}

describe('FastCounter', () => {
  it('exposes byte for byte what prom-client exposes for the same increments (text and JSON)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.integer({ min: 0, max: SERIES.length - 1 }), fc.oneof(fc.constant(1), fc.integer({ min: 0, max: 1_000_000 }), fc.double({ min: 0, max: 1e6, noNaN: true }))), {
          maxLength: 200,
        }),
        async (increments) => {
          const { fast, reference } = both(increments);
          expect(await fast.metrics(), 'prom-client internal: the registry reads a metric it did not make (src/observability/fast-counter.ts: registerMetric, name, help, type, aggregator, get())').toBe(await reference.metrics());
          expect(await fast.getMetricsAsJSON()).toEqual(await reference.getMetricsAsJSON());
        },
      ),
      { numRuns: 100 },
    );
  });

  it('the comparison can fail: one increment more on one side shows', async () => {
    const { fast, reference, f } = both([[0, 1]]);
    f.inc(2);
    expect(await fast.metrics()).not.toBe(await reference.metrics());
    expect(await fast.metrics()).toContain('consent_sidecar_decisions_total{decision="deny",source="fail_closed",route="check"} 1');
  });

  it('binds a label set to its index, and refuses one it was not declared with', () => {
    const f = new FastCounter(NAME, HELP, LABELS, SERIES, new Registry());
    expect(f.indexOf('deny', 'rejected', 'check')).toBe(3);
    expect(() => f.indexOf('allow', 'cache', 'forward_auth')).toThrow(/not a declared series/);
    expect(() => new FastCounter(NAME, HELP, LABELS, [['allow', 'cache']], new Registry())).toThrow(/one value per label/);
  });
});
