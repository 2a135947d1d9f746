import { afterEach, describe, expect, it } from 'vitest';
import { loadServeConfig } from '../../src/config/index.js';
import { silentLogger } from '../../src/observability/index.js';
import { startSidecar, type SidecarHandle } from '../../src/assembly/sidecar.js';
import { deliveryHeaders, envelope, metricValue, nowS, post, SECRET_A, startApp, type FakeApp } from '../helpers/webhooks.js';

let app: FakeApp | undefined;
let sidecar: SidecarHandle | undefined;
afterEach(async () => {
  await sidecar?.close();
  await app?.close();
});

describe('composition root', () => {
  it('serves the webhook ingress on --webhook-listen and forwards to --app-webhook-url', async () => {
    app = await startApp();
    const config = loadServeConfig(
      {
        'upstream-url': 'http://127.0.0.1:9',
        'api-key': 'k',
        listen: '127.0.0.1:0',
        'webhook-listen': '127.0.0.1:0',
        'admin-listen': '127.0.0.1:0',
        'app-webhook-url': app.url,
        'webhook-secret': [SECRET_A],
      },
      {},
    );
    sidecar = await startSidecar(config, { logger: silentLogger() });
    expect(sidecar.urls.webhook).not.toBeNull();
    const body = envelope({ id: 'evt_wired', type: 'consent_action.created', data: {} });
    const reply = await post(`${sidecar.urls.webhook}/webhooks`, body, deliveryHeaders(SECRET_A, nowS(), body));
    expect(reply.status).toBe(200);
    expect(app.received).toHaveLength(1);
    expect(await metricValue(sidecar.registry, 'consent_sidecar_webhook_revocations_total', { scope: 'all' })).toBe(1);
  });
});
