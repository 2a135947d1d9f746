import { Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { staticSecret } from '../../src/config/index.js';
import { createLogger, createRegistry } from '../../src/observability/index.js';
import { deliveryHeaders, envelope, metricValue, post, RecordingRevocations, SECRET_A, startApp, startWebhookListener, VECTOR_TS, webhookConfig, type FakeApp } from '../helpers/webhooks.js';

// Issue 14: at the default level (info) a delivery writes no line of its own; purges are logged
// at most once a second per scope, saying how many were held back. Counters keep every event.

let app: FakeApp;
beforeEach(async () => {
  app = await startApp();
});
afterEach(async () => app.close());

describe('webhook log volume at --log-level info', () => {
  it('20 accepted events write no per-event line; 20 purges of everything write one, the counters count all', async () => {
    const lines: Record<string, unknown>[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const l of chunk.toString().split('\n')) if (l) lines.push(JSON.parse(l) as Record<string, unknown>);
        done();
      },
    });
    const registry = createRegistry({ defaultMetrics: false });
    const revocations = new RecordingRevocations();
    const listener = await startWebhookListener({
      config: { ...webhookConfig({ appUrl: app.url }), secrets: staticSecret([SECRET_A], 'test') },
      logger: createLogger('info', sink),
      registry,
      revocations,
      now: () => VECTOR_TS * 1000,
    });
    const url = listener.url;
    try {
      for (let i = 0; i < 20; i++) {
        const plain = envelope({ id: `evt_p${i}`, sequence: i + 1 });
        expect((await post(url, plain, deliveryHeaders(SECRET_A, VECTOR_TS, plain, `evt_p${i}`))).status).toBe(200);
        const purge = envelope({ id: `evt_c${i}`, sequence: 100 + i, type: 'consent_action.created', data: {} });
        expect((await post(url, purge, deliveryHeaders(SECRET_A, VECTOR_TS, purge, `evt_c${i}`))).status).toBe(200);
      }
      expect(lines.filter((l) => l.event === 'webhook_accepted')).toEqual([]);
      const purges = lines.filter((l) => l.event === 'webhook_revocation');
      expect(purges.length).toBeGreaterThanOrEqual(1);
      expect(purges.length).toBeLessThan(5);
      // The listener's clock is frozen: one line, the other 19 purges held back.
      expect(purges).toHaveLength(1);
      expect(purges[0]).toMatchObject({ scope: 'all', suppressedSinceLast: 0 });
      expect(revocations.calls.filter((c) => c === 'all').length).toBe(20);
      expect(await metricValue(registry, 'consent_sidecar_webhook_deliveries_total', { outcome: 'accepted' })).toBe(40);
      expect(await metricValue(registry, 'consent_sidecar_webhook_revocations_total', { scope: 'all' })).toBe(20);
      expect(await registry.metrics()).toContain('consent_sidecar_webhook_forward_duration_seconds_count{outcome="accepted"} 40\n');
    } finally {
      await listener.close();
    }
  });
});
