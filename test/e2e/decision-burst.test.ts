import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServeProcess } from '../helpers/serve-process.js';
import { startSlowService, type SlowService } from '../helpers/slow-service.js';
import { PATIENCE_MS } from '../helpers/wait.js';

/**
 * A burst of distinct misses is not an outage. 1,000 concurrent checks for distinct keys against a
 * service answering in 300 ms (its own process), through a real `serve` (its own process) with 64
 * upstream connections and the default deadline (2,000 ms) and breaker (5 failures): what cannot be
 * sent in time is answered `overload`, every timeout is of a request the service really received,
 * the breaker stays closed, and the next miss is answered by the service.
 */
const BURST = 1000;
const SERVICE_MS = 300;

describe('a burst of 1,000 distinct misses, 64 connections, a service answering in 300 ms', () => {
  let service: SlowService;
  let serve: ServeProcess;
  let app: Pool;

  beforeAll(async () => {
    service = await startSlowService(SERVICE_MS);
    serve = new ServeProcess({
      'upstream-url': service.url,
      'api-key': 'burst-key',
      listen: '127.0.0.1:0',
      'admin-listen': '127.0.0.1:0',
      'upstream-connections': '64',
      // The start-up key check would be one more request to the service; its count is what this test reads.
      'api-key-check': 'off',
    });
    await serve.start();
    app = new Pool(serve.urls.decision, { connections: BURST });
  }, PATIENCE_MS * 4);

  afterAll(async () => {
    await app?.destroy();
    await serve?.stop();
    await service?.close();
  });

  async function check(userReference: string): Promise<{ userReference: string; status: number; source: string; body: Record<string, unknown> }> {
    const res = await app.request({
      method: 'POST',
      path: '/v1/authorization/check',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ userReference, configKey: 'burst-flow' }),
    });
    return { userReference, status: res.statusCode, source: String(res.headers['x-consent-decision-source']), body: (await res.body.json()) as Record<string, unknown> };
  }

  it('fails only as overload or as timeouts of requests the service received; the breaker stays closed; the next miss is the service\'s ALLOW', async () => {
    const answers = await Promise.all(Array.from({ length: BURST }, (_, i) => check(`burst-${i}`)));
    const { received } = await service.stats();
    const reached = new Set(received);

    const allowed = answers.filter((a) => a.status === 200);
    const failed = answers.filter((a) => a.status !== 200);
    const byCause = (cause: string): typeof answers => failed.filter((a) => a.body.error === cause);
    const overload = byCause('overload');
    const timedOut = byCause('upstream_timeout');
    const summary = `ALLOW ${allowed.length}, overload ${overload.length}, upstream_timeout ${timedOut.length} (${timedOut.filter((a) => !reached.has(a.userReference)).length} never reached the service), other ${failed.length - overload.length - timedOut.length}; the service received ${received.length}`;

    // Every answer is the service's ALLOW or a 503 of one of the two causes, and the service did work.
    expect(allowed.every((a) => a.source === 'upstream' && a.body.decision === 'ALLOW' && reached.has(a.userReference)), summary).toBe(true);
    expect(failed.every((a) => a.status === 503 && a.source === 'fail-closed' && a.body.decision === 'DENY'), summary).toBe(true);
    expect(overload.length + timedOut.length, summary).toBe(failed.length);
    expect(allowed.length, summary).toBeGreaterThan(0);
    // A timeout is the service's only when the service received the request.
    expect(timedOut.filter((a) => !reached.has(a.userReference)).map((a) => a.userReference), summary).toEqual([]);
    // Each distinct key is one request at most; none of the refused ones reached the service.
    expect(received.length, summary).toBe(reached.size);
    expect(overload.filter((a) => reached.has(a.userReference)).map((a) => a.userReference), summary).toEqual([]);

    // Counted by cause, and the breaker never opened.
    expect(await serve.metric('consent_sidecar_fail_closed_total', { cause: 'overload' }), summary).toBe(overload.length);
    expect(await serve.metric('consent_sidecar_fail_closed_total', { cause: 'upstream_timeout' }), summary).toBe(timedOut.length);
    expect(await serve.metric('consent_sidecar_circuit_breaker_state', { state: 'closed' }), summary).toBe(1);
    expect(serve.logs().filter((l) => l.event === 'circuit_breaker'), summary).toEqual([]);

    // A miss for a new key right after the burst is answered by the service.
    const after = await check('after-the-burst');
    expect([after.status, after.source, after.body.decision], summary).toEqual([200, 'upstream', 'ALLOW']);
    expect((await service.stats()).received).toContain('after-the-burst');
  }, PATIENCE_MS * 4);
});
