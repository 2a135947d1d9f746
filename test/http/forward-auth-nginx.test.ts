import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { freePort, renderShippedConf, SHIPPED_NGINX_CONF, startNginx, type RunningNginx } from '../helpers/nginx.js';
import { startTestSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { allow, CHECK_PATH, deny, startUpstream, type ReceivedRequest, type ScriptedUpstream } from '../helpers/upstream.js';

// A real nginx (Debian's nginx-light, auth_request) running the forward-auth example that the shop
// chart ships and docs/decision-api.md shows, in front of a real app server, asking the real sidecar, which
// asks a scripted consent service. Everything on loopback, on free ports.

const KEY = 'marketing-email';

interface AppHit {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

let upstream: ScriptedUpstream;
let sidecar: TestSidecar;
let app: Server;
let nginx: RunningNginx;
const appHits: AppHit[] = [];

/** The service: ALLOW for alice and grace, DENY for everyone else. */
const decide = (r: ReceivedRequest) => {
  const { userReference, configKey } = JSON.parse(r.body) as { userReference: string; configKey: string };
  return { body: ['alice', 'grace'].includes(userReference) ? allow(configKey, Date.now() + 60_000) : deny(configKey) };
};

const asked = (): { userReference: string; configKey: string }[] =>
  upstream.requests.filter((r) => r.url === CHECK_PATH).map((r) => JSON.parse(r.body) as { userReference: string; configKey: string });

async function get(path: string, headers: Record<string, string> = {}, method = 'GET', body?: string): Promise<{ status: number; text: string }> {
  const res = await request(`${nginx.url}${path}`, { method: method as 'GET', headers, body: body ?? null });
  return { status: res.statusCode, text: await res.body.text() };
}

beforeAll(async () => {
  upstream = await startUpstream(decide);
  // The base deadline (5 s): a service that answers never meets it, even on a busy machine; the case
  // of the service that never answers waits it out (or nginx's own 5 s read timeout).
  sidecar = await startTestSidecar(upstream.url);
  app = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      appHits.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('hello from the app');
    });
  });
  await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
  const port = await freePort();
  const conf = renderShippedConf({
    '.Values.nginx.port': String(port),
    '.Values.nginx.appPort': String((app.address() as AddressInfo).port),
    'include "consent-sidecar.decisionUrl" . | trimPrefix "http://"': sidecar.handle.urls.decision.replace('http://', ''),
    '.Values.nginx.identityHeader | lower | replace "-" "_"': 'x_forwarded_user',
    '.Values.nginx.configKey | urlquery': encodeURIComponent(KEY),
  });
  nginx = await startNginx(conf, port);
}, 30_000);

afterAll(async () => {
  await nginx?.close();
  await sidecar?.close();
  await upstream?.close();
  await new Promise((r) => app?.close(r));
});

describe('nginx auth_request with the shipped example', () => {
  beforeEach(async () => {
    appHits.length = 0;
    upstream.resetLog();
    upstream.reply(decide);
    await sidecar.send('DELETE', '/sidecar/cache');
  });

  it('an allowed user reaches the app, which sees the checked user reference and validUntil', async () => {
    const r = await get('/orders/42?page=2', { 'x-forwarded-user': 'alice' });
    expect(r.status).toBe(200);
    expect(r.text).toBe('hello from the app');
    expect(appHits).toHaveLength(1);
    expect(appHits[0]!.url).toBe('/orders/42?page=2');
    expect(appHits[0]!.headers['x-user-reference']).toBe('alice');
    expect(Number(appHits[0]!.headers['x-consent-valid-until'])).toBeGreaterThan(Date.now());
    expect(asked()).toEqual([{ userReference: 'alice', configKey: KEY }]);
    // Again: from the sidecar's cache, the service is not asked twice.
    expect((await get('/orders/43', { 'x-forwarded-user': 'alice' })).status).toBe(200);
    expect(upstream.checks).toBe(1);
  });

  it('an allowed request with a body reaches the app with its body (the subrequest carries none)', async () => {
    const r = await get('/orders', { 'x-forwarded-user': 'grace', 'content-type': 'application/json' }, 'POST', '{"item":"book"}');
    expect(r.status).toBe(200);
    expect(appHits.map((h) => [h.method, h.body])).toEqual([['POST', '{"item":"book"}']]);
  });

  it('a denied user gets 403 and the app sees nothing', async () => {
    const r = await get('/orders/42', { 'x-forwarded-user': 'bob' });
    expect(r.status).toBe(403);
    expect(appHits).toEqual([]);
    expect(asked()).toEqual([{ userReference: 'bob', configKey: KEY }]);
  });

  it.each([
    ['answers 500', { status: 500 }],
    ['resets the connection', { fault: 'reset' as const }],
    ['never answers', { fault: 'hang' as const }],
  ])('the consent service down (%s): a 5xx, and the app sees nothing', async (_name, reply) => {
    upstream.reply(reply);
    const r = await get('/orders/42', { 'x-forwarded-user': 'alice' });
    expect(r.status).toBeGreaterThanOrEqual(500);
    expect(appHits).toEqual([]);
  });

  it("a client's own X-User-Reference is overwritten with the authenticated identity", async () => {
    // The client claims to be alice (allowed); the identity layer says bob (denied).
    const r = await get('/orders/42', { 'x-forwarded-user': 'bob', 'x-user-reference': 'alice' });
    expect(r.status).toBe(403);
    expect(appHits).toEqual([]);
    expect(asked()).toEqual([{ userReference: 'bob', configKey: KEY }]);
    // The other way round, the app sees alice, not what the client wrote.
    expect((await get('/orders/42', { 'x-forwarded-user': 'alice', 'x-user-reference': 'mallory' })).status).toBe(200);
    expect(appHits.map((h) => h.headers['x-user-reference'])).toEqual(['alice']);
  });

  it("without an identity, a client's X-User-Reference alone gets nowhere (5xx, the service is not asked)", async () => {
    const r = await get('/orders/42', { 'x-user-reference': 'alice' });
    expect(r.status).toBeGreaterThanOrEqual(500);
    expect(appHits).toEqual([]);
    expect(upstream.count).toBe(0);
  });

  it("a client's own X-Consent-Config-Key is stripped: the configKey is the one in the config", async () => {
    const r = await get('/orders/42', { 'x-forwarded-user': 'alice', 'x-consent-config-key': 'something-else' });
    expect(r.status).toBe(200);
    expect(asked()).toEqual([{ userReference: 'alice', configKey: KEY }]);
    expect(appHits[0]!.headers['x-consent-config-key']).toBeUndefined();
  });

  it('the sidecar gone: a 5xx, and the app sees nothing (run last: it stops the sidecar)', async () => {
    await sidecar.close();
    const r = await get('/orders/42', { 'x-forwarded-user': 'alice' });
    expect(r.status).toBeGreaterThanOrEqual(500);
    expect(appHits).toEqual([]);
  });
});

// docs/decision-api.md used to include this Helm template verbatim (with its {{ }} to substitute by
// hand); it now shows the plain examples/forward-auth/nginx.conf, which test/http/forward-auth-recipes.test.ts
// runs and ties to this template's rendering. The docs still name this file.
describe('the forward-auth docs point at the example that runs here', () => {
  it('docs/decision-api.md names charts/examples/shop/files/nginx-forward-auth.conf, and the file is a template of the chart', () => {
    const page = readFileSync(new URL('../../docs/decision-api.md', import.meta.url), 'utf8');
    expect(page).toContain('files/nginx-forward-auth.conf');
    expect(readFileSync(SHIPPED_NGINX_CONF, 'utf8')).toContain('{{ .Values.nginx.configKey | urlquery }}');
  });
});
