import { request } from 'undici';
import { request as httpRequest } from 'node:http';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  deliveryHeaders,
  envelope,
  loadVectors,
  metricValue,
  nowS,
  post,
  SECRET_A,
  SECRET_B,
  sign,
  startApp,
  startSidecar,
  VECTOR_TS,
  type FakeApp,
  type SidecarUnderTest,
} from '../helpers/webhooks.js';
import type { RequiredHeader, Secret } from '../../src/config/index.js';

let app: FakeApp;
let sidecar: SidecarUnderTest;
let clockMs = VECTOR_TS * 1000;

beforeEach(async () => {
  clockMs = VECTOR_TS * 1000;
  app = await startApp();
  sidecar = await startSidecar({
    appUrl: app.url,
    secrets: [SECRET_A, SECRET_B],
    requiredHeader: { name: 'x-tenant-auth', value: 'tenant-token-1' },
    maxBodyBytes: 4096,
    now: () => clockMs,
  });
});
afterEach(async () => {
  await sidecar.close();
  await app.close();
});

const auth = { 'x-tenant-auth': 'tenant-token-1' };

describe('verified deliveries reach the app unchanged', () => {
  for (const v of loadVectors()) {
    it(`${v.file} signed with ${v.secret === SECRET_A ? 'secret #0' : 'secret #1'} (openssl)`, async () => {
      const headers = {
        ...auth,
        'content-type': 'application/json',
        'x-service-event-id': 'from-header',
        'x-service-delivery-id': 'dlv_1',
        'x-service-timestamp': String(v.timestamp),
        'x-service-signature': `v1=${v.hex}`,
      };
      const reply = await post(sidecar.url, v.body, headers);
      expect(reply.status).toBe(200);
      expect(app.received).toHaveLength(1);
      const got = app.received[0]!;
      expect(got.body.equals(v.body)).toBe(true);
      expect(got.headers['x-service-signature']).toBe(`v1=${v.hex}`);
      expect(got.headers['x-service-timestamp']).toBe(String(v.timestamp));
      // The header is not signed, the body is: the app gets the envelope's id, not the header sent
      // (this assertion used to expect 'from-header', which let an unsigned header pick the id).
      expect(got.headers['x-service-event-id']).toBe((JSON.parse(v.body.toString()) as { id: string }).id);
      expect(got.headers['x-service-event-id']).not.toBe('from-header');
      expect(got.headers['x-service-delivery-id']).toBe('dlv_1');
      expect(got.headers['content-type']).toBe('application/json');
      expect(got.headers['x-consent-sidecar-verified']).toBe('v1');
      expect(got.headers['x-tenant-auth']).toBeUndefined();
      const index = v.secret === SECRET_A ? '0' : '1';
      expect(await metricValue(sidecar.registry, 'consent_sidecar_webhook_secret_matches_total', { index })).toBe(1);
      expect(await metricValue(sidecar.registry, 'consent_sidecar_webhook_deliveries_total', { outcome: 'accepted' })).toBe(1);
    });
  }
});

describe('rejections: 401, nothing parsed, nothing forwarded', () => {
  const body = Buffer.from('{"id":"evt_9","sequence":1,"type":"t","occurredAt":1,"data":{}}');
  const good = (): Record<string, string> => ({ ...auth, ...deliveryHeaders(SECRET_A, VECTOR_TS, body, 'evt_9') });
  const without = (h: Record<string, string>, name: string): Record<string, string> => {
    const copy = { ...h };
    delete copy[name];
    return copy;
  };
  const cases: Array<[string, () => Record<string, string>, string]> = [
    ['missing timestamp', () => without(good(), 'x-service-timestamp'), 'timestamp_missing'],
    ['missing signature', () => without(good(), 'x-service-signature'), 'signature_missing'],
    ['scheme v2', () => ({ ...good(), 'x-service-signature': good()['x-service-signature']!.replace('v1=', 'v2=') }), 'signature_scheme'],
    ['timestamp not a number', () => ({ ...good(), 'x-service-timestamp': '17672256OO' }), 'timestamp_invalid'],
    [
      'stale by 301 s',
      () => ({ ...good(), 'x-service-timestamp': String(VECTOR_TS - 301), 'x-service-signature': sign(SECRET_A, VECTOR_TS - 301, body) }),
      'timestamp_too_old',
    ],
    [
      'ahead by 301 s',
      () => ({ ...good(), 'x-service-timestamp': String(VECTOR_TS + 301), 'x-service-signature': sign(SECRET_A, VECTOR_TS + 301, body) }),
      'timestamp_too_new',
    ],
    ['unknown secret', () => ({ ...good(), 'x-service-signature': sign('whsec_other', VECTOR_TS, body) }), 'signature_mismatch'],
    ['signature of another timestamp', () => ({ ...good(), 'x-service-signature': sign(SECRET_A, VECTOR_TS - 1, body) }), 'signature_mismatch'],
    ['missing required header', () => without(good(), 'x-tenant-auth'), 'required_header_missing'],
    ['wrong required header', () => ({ ...good(), 'x-tenant-auth': 'tenant-token-2' }), 'required_header_mismatch'],
  ];
  it.each(cases)('%s → 401 %s', async (_name, headers, reason) => {
    const reply = await post(sidecar.url, body, headers());
    expect(reply.status).toBe(401);
    expect(JSON.parse(reply.body)).toEqual({ error: reason });
    expect(app.received).toHaveLength(0);
    expect(await metricValue(sidecar.registry, 'consent_sidecar_webhook_rejections_total', { reason })).toBe(1);
    expect(await metricValue(sidecar.registry, 'consent_sidecar_webhook_deliveries_total', { outcome: 'rejected' })).toBe(1);
  });

  // One rule for a header given twice (src/lib/headers.ts): ambiguous, refused, never resolved by
  // picking one; before, node joined the copies into one value and the reason depended on which
  // check happened to fail.
  it.each(['x-service-signature', 'x-service-timestamp', 'x-tenant-auth'])('%s given twice (even a valid value and its copy) → 401 header_repeated', async (name) => {
    const h = good();
    const flat: string[] = [];
    for (const [k, v] of Object.entries(h)) flat.push(k, v);
    flat.push(name, h[name]!);
    const reply = await request(sidecar.url, { method: 'POST', body, headers: flat });
    expect(reply.statusCode).toBe(401);
    expect(await reply.body.json()).toEqual({ error: 'header_repeated' });
    expect(app.received).toHaveLength(0);
    expect(await metricValue(sidecar.registry, 'consent_sidecar_webhook_rejections_total', { reason: 'header_repeated' })).toBe(1);
  });

  it('the required header is read once per delivery: the header picked is the header judged, even when it rotates between any two reads', async () => {
    // The most hurried rotation there is: every read of the secret gives the other header. A sender
    // in the middle of a rotation sends both; before, the listener picked by one read and judged by
    // the next, so every such delivery was refused.
    const headersOf = [
      { name: 'x-tenant-auth', value: 'tenant-token-1' },
      { name: 'x-tenant-auth-next', value: 'tenant-token-2' },
    ];
    let reads = 0;
    const rotating: Secret<RequiredHeader> = { current: () => headersOf[reads++ % 2]!, origin: '--webhook-required-header-file (test)', watch: () => undefined, close: () => undefined };
    await sidecar.close();
    sidecar = await startSidecar({ appUrl: app.url, secrets: [SECRET_A], requiredHeaderSecret: rotating, now: () => clockMs });
    for (let i = 0; i < 4; i++) {
      const b = envelope({ id: `evt_rot_${i}` });
      const reply = await post(sidecar.url, b, { 'x-tenant-auth': 'tenant-token-1', 'x-tenant-auth-next': 'tenant-token-2', ...deliveryHeaders(SECRET_A, VECTOR_TS, b, `evt_rot_${i}`) });
      expect(reply.status).toBe(200);
    }
    expect(app.received).toHaveLength(4);
    expect(reads).toBe(4);
  });

  it('invalid JSON with a bad signature is 401, not 400: it was never parsed', async () => {
    const junk = Buffer.from('{not json');
    const reply = await post(sidecar.url, junk, { ...auth, ...deliveryHeaders(SECRET_A, VECTOR_TS, body) });
    expect(reply.status).toBe(401);
    expect(app.received).toHaveLength(0);
    expect(await metricValue(sidecar.registry, 'consent_sidecar_webhook_rejections_total', { reason: 'invalid_envelope' })).toBe(0);
  });

  it('a revoking event with a bad signature purges nothing', async () => {
    const v = loadVectors().find((x) => x.file === 'revoke.json')!;
    const reply = await post(sidecar.url, v.body, { ...auth, ...deliveryHeaders('whsec_forged', VECTOR_TS, v.body) });
    expect(reply.status).toBe(401);
    expect(sidecar.revocations.calls).toEqual([]);
  });
});

describe('envelope, routes, sizes', () => {
  it.each([
    ['not JSON', '{"id":'],
    ['array', '[1]'],
    ['data is null', JSON.stringify({ id: 'e', sequence: 1, type: 't', occurredAt: 1, data: null })],
    ['sequence is a string', JSON.stringify({ id: 'e', sequence: '1', type: 't', occurredAt: 1, data: {} })],
  ])('verified but %s → 400, not forwarded', async (_name, text) => {
    const reply = await post(sidecar.url, text, { ...auth, ...deliveryHeaders(SECRET_A, VECTOR_TS, text) });
    expect(reply.status).toBe(400);
    expect(JSON.parse(reply.body)).toEqual({ error: 'invalid_envelope' });
    expect(app.received).toHaveLength(0);
  });

  it('404 on another path, 405 on another method', async () => {
    const body = envelope();
    const headers = { ...auth, ...deliveryHeaders(SECRET_A, VECTOR_TS, body) };
    expect((await post(sidecar.url.replace('/webhooks', '/other'), body, headers)).status).toBe(404);
    expect((await post(`${sidecar.url}/x`, body, headers)).status).toBe(404);
    const refused = await request(sidecar.url, { method: 'GET' });
    expect(refused.statusCode).toBe(405);
    expect(refused.headers.allow).toBe('POST');
    expect(refused.headers['content-type']).toBe('application/json');
    expect(await refused.body.json()).toEqual({ error: 'method_not_allowed' });
    expect((await post(sidecar.url, body, headers, 'PUT')).status).toBe(405);
    expect((await post(`${sidecar.url}?probe=1`, body, headers)).status).toBe(200);
    expect(app.received).toHaveLength(1);
  });

  it('413 when Content-Length is over the limit, app untouched', async () => {
    const big = Buffer.alloc(4097, 0x20);
    const reply = await post(sidecar.url, big, { ...auth, ...deliveryHeaders(SECRET_A, VECTOR_TS, big) });
    expect(reply.status).toBe(413);
    expect(app.received).toHaveLength(0);
    expect(await metricValue(sidecar.registry, 'consent_sidecar_webhook_rejections_total', { reason: 'body_too_large' })).toBe(1);
  });

  it('413 for a chunked body that grows past the limit, and the client reads the answer', async () => {
    const headers = { ...auth, ...deliveryHeaders(SECRET_A, VECTOR_TS, 'whatever') };
    const status = await new Promise<number>((resolve, reject) => {
      const url = new URL(sidecar.url);
      const req = httpRequest({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      let sent = 0;
      const pump = (): void => {
        // Keeps sending well past the limit; the server must answer without buffering it.
        while (sent < 1_000_000) {
          sent += 1000;
          if (!req.write(Buffer.alloc(1000, 0x61))) {
            req.once('drain', pump);
            return;
          }
        }
        req.end();
      };
      pump();
    });
    expect(status).toBe(413);
    expect(app.received).toHaveLength(0);
  });

  it('a body exactly at the limit is accepted', async () => {
    const prefix = '{"id":"evt_big","sequence":1,"type":"t","occurredAt":1,"data":{"pad":"';
    const text = prefix + 'x'.repeat(4096 - prefix.length - 3) + '"}}';
    expect(Buffer.byteLength(text)).toBe(4096);
    const reply = await post(sidecar.url, text, { ...auth, ...deliveryHeaders(SECRET_A, VECTOR_TS, text) });
    expect(reply.status).toBe(200);
  });
});

describe('time', () => {
  afterEach(() => vi.useRealTimers());

  it('tolerance edges through the listener with a frozen system clock', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(VECTOR_TS * 1000 + 500);
    const frozen = await startSidecar({ appUrl: app.url, maxBodyBytes: 4096 });
    try {
      for (const [offset, status] of [
        [-300, 200],
        [300, 200],
        [-301, 401],
        [301, 401],
      ] as const) {
        const ts = VECTOR_TS + offset;
        const body = envelope({ id: `evt_t${offset}` });
        const reply = await post(frozen.url, body, deliveryHeaders(SECRET_A, ts, body));
        expect(reply.status, `offset ${offset}`).toBe(status);
      }
      expect(app.received).toHaveLength(2);
    } finally {
      await frozen.close();
    }
  });

  it('real clock: a fresh delivery passes, one 10 minutes old does not', async () => {
    const real = await startSidecar({ appUrl: app.url });
    try {
      const body = envelope({ id: 'evt_real' });
      expect((await post(real.url, body, deliveryHeaders(SECRET_A, nowS(), body))).status).toBe(200);
      const old = nowS() - 600;
      expect((await post(real.url, body, deliveryHeaders(SECRET_A, old, body))).status).toBe(401);
      expect(await metricValue(real.registry, 'consent_sidecar_webhook_rejections_total', { reason: 'timestamp_too_old' })).toBe(1);
    } finally {
      await real.close();
    }
  });
});

describe('sequence', () => {
  it('lower than the highest → forwarded with the out-of-order header; gaps are fine', async () => {
    for (const [id, sequence] of [
      ['a', 10],
      ['b', 50],
      ['c', 20],
      ['d', 51],
    ] as const) {
      const body = envelope({ id, sequence });
      expect((await post(sidecar.url, body, { ...auth, ...deliveryHeaders(SECRET_A, VECTOR_TS, body, id) })).status).toBe(200);
    }
    expect(app.received.map((r) => r.headers['x-consent-sidecar-out-of-order'] ?? '-')).toEqual(['-', '-', '1', '-']);
    expect(await metricValue(sidecar.registry, 'consent_sidecar_webhook_out_of_order_total')).toBe(1);
    expect(await metricValue(sidecar.registry, 'consent_sidecar_webhook_highest_sequence')).toBe(51);
  });
});

describe('unread bodies', () => {
  it('a 1 MB unsigned upload gets its 401 and the connection stays usable', async () => {
    const big = Buffer.alloc(1_000_000, 0x20);
    const { Client } = await import('undici');
    const client = new Client(new URL(sidecar.url).origin, { pipelining: 1 });
    try {
      const first = await client.request({ path: '/webhooks', method: 'POST', body: big, headers: {} });
      await first.body.text();
      expect(first.statusCode).toBe(401);
      const body = envelope({ id: 'evt_after' });
      const second = await client.request({ path: '/webhooks', method: 'POST', body, headers: { ...auth, ...deliveryHeaders(SECRET_A, VECTOR_TS, body) } });
      await second.body.text();
      expect(second.statusCode).toBe(200);
    } finally {
      await client.close();
    }
  });
});
