import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import * as facade from '../../src/observability/prom.js';

// src/observability/prom.ts requires prom-client's classes one file each (its index also loads
// the Pushgateway and node:https): each must be the very class the index exports.
describe('prom-client, one file each', () => {
  it('the classes are the index\'s own', () => {
    const index = createRequire(import.meta.url)('prom-client') as Record<string, unknown>;
    for (const name of ['Registry', 'Counter', 'Gauge', 'Histogram', 'collectDefaultMetrics'] as const) {
      expect(facade[name], name).toBe(index[name]);
    }
  });
});
