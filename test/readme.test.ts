import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { envName, SERVE_OPTIONS } from '../src/config/index.js';
import { DecisionMetrics } from '../src/decision/index.js';
import { createRegistry } from '../src/observability/index.js';
import { createRedisMetrics } from '../src/redis/index.js';
import { createWebhookMetrics } from '../src/webhooks/index.js';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

describe('README tells the truth', () => {
  it('documents every serve flag and its variable', () => {
    for (const o of SERVE_OPTIONS) {
      expect(readme, `--${o.name}`).toContain(`--${o.name}`);
      expect(readme, envName(o.name)).toContain(envName(o.name));
    }
  });

  it('documents every metric family the sidecar registers', async () => {
    const registry = createRegistry({ defaultMetrics: false });
    new DecisionMetrics(registry, () => 0);
    createWebhookMetrics(registry);
    createRedisMetrics(registry);
    for (const m of await registry.getMetricsAsJSON()) expect(readme, m.name).toContain(`\`${m.name}\``);
  });

  it('has the install-and-run and the test commands', () => {
    expect(readme).toContain('npm ci && npm run build && node dist/cli.js demo');
    expect(readme).toContain('npm ci && npm test');
    expect(readme).toContain('bash test/setup.sh && npm ci && npm test');
    expect(readFileSync(new URL('../.ci/run', import.meta.url), 'utf8')).toContain('bash test/setup.sh && npm ci && npm test');
  });

  it('has no unfilled placeholders', () => {
    expect(readme).not.toMatch(/\b[A-Z]+_SECTION\b|\bFLAGS_TABLE\b|\bWEBHOOK_METRICS\b/);
  });
});
