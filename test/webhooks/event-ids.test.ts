import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { logId, MAX_EVENT_ID_BYTES } from '../../src/webhooks/index.js';
import { deliveryHeaders, envelope, metricValue, nowS, post, SECRET_A, startApp, startSidecar, type FakeApp, type SidecarUnderTest } from '../helpers/webhooks.js';

/**
 * Event ids as the contract bounds them (Several replicas, "Event ids"): any Unicode up to 1,024
 * bytes is delivered once, with the header percent-encoded where the id cannot be a header value;
 * longer is 400 invalid_envelope. Before, an id with CR/LF or a character above U+00FF was
 * acknowledged and then could never be forwarded (the header could not be written).
 */
let app: FakeApp;
let sidecar: SidecarUnderTest;
beforeAll(async () => {
  app = await startApp();
  sidecar = await startSidecar({ appUrl: app.url });
});
afterAll(async () => {
  await sidecar.close();
  await app.close();
});

const send = (id: string) => {
  const body = envelope({ id });
  return post(sidecar.url, body, deliveryHeaders(SECRET_A, nowS(), body, 'evt_header'));
};

describe('event ids', () => {
  it.each([
    ['CR and LF', 'evt\r\nx-injected: 1'],
    ['a character above U+00FF', 'evt_☃_雪'],
    ['Latin-1 and a percent sign', 'évt_100%'],
    ['a space', 'evt 1'],
  ])('an id with %s is delivered once, x-service-event-id percent-encoded (UTF-8) and flagged', async (_what, id) => {
    const before = app.received.length;
    expect((await send(id)).status).toBe(200);
    expect(app.received).toHaveLength(before + 1);
    const got = app.received[before]!;
    expect(got.headers['x-consent-sidecar-event-id-encoding']).toBe('percent');
    expect(decodeURIComponent(String(got.headers['x-service-event-id']))).toBe(id);
    expect(got.headers['x-injected']).toBeUndefined();
    // once: the copy is a duplicate
    expect(JSON.parse((await send(id)).body)).toEqual({ status: 'duplicate' });
    expect(app.received).toHaveLength(before + 1);
  });

  it('a plain id is passed unchanged, without the encoding header', async () => {
    const before = app.received.length;
    expect((await send('evt_plain-1.2~3')).status).toBe(200);
    expect(app.received[before]!.headers['x-service-event-id']).toBe('evt_plain-1.2~3');
    expect(app.received[before]!.headers['x-consent-sidecar-event-id-encoding']).toBeUndefined();
  });

  it(`an id of ${MAX_EVENT_ID_BYTES} bytes is accepted; one byte more is 400 invalid_envelope, counted, never forwarded`, async () => {
    const before = app.received.length;
    const exact = 'x'.repeat(MAX_EVENT_ID_BYTES);
    expect((await send(exact)).status).toBe(200);
    expect(app.received).toHaveLength(before + 1);
    const tooLong = await send('x'.repeat(MAX_EVENT_ID_BYTES - 1) + 'é');
    expect(tooLong.status).toBe(400);
    expect(JSON.parse(tooLong.body)).toEqual({ error: 'invalid_envelope' });
    expect(app.received).toHaveLength(before + 1);
    expect(await metricValue(sidecar.registry, 'consent_sidecar_webhook_rejections_total', { reason: 'invalid_envelope' })).toBe(1);
  });

  it('a log line carries at most the first 128 characters of an id', () => {
    expect(logId('short')).toBe('short');
    const long = 'y'.repeat(700_000);
    expect(logId(long).length).toBeLessThanOrEqual(129);
    expect(logId(long).startsWith('y'.repeat(128))).toBe(true);
  });
});
