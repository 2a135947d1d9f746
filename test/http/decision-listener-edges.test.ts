import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { useSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { allow } from '../helpers/upstream.js';

/**
 * The decision listener as a well-behaved proxy on loopback: a `Host` check against DNS
 * rebinding, a method allow-list for the passthrough, hop-by-hop headers dropped both ways, and the
 * sidecar's own `x-consent-*` headers never taken from the service.
 */
const fx = useSidecar();

/** One raw HTTP/1.1 exchange (the Host is the test's to choose): status line, headers and body. */
function raw(url: string, request: string): Promise<{ status: number; head: string; body: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    let data = '';
    socket.on('data', (d: Buffer) => (data += d.toString('latin1')));
    socket.on('error', reject);
    socket.on('close', () => {
      const [head = '', body = ''] = data.split('\r\n\r\n');
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0), head: head.toLowerCase(), body });
    });
    socket.write(request);
  });
}

const CHECK = '{"userReference":"u","configKey":"k"}';
const post = (path: string, host: string, body = CHECK): string =>
  `POST ${path} HTTP/1.1\r\nhost: ${host}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`;

describe('Host on the decision listener', () => {
  it.each(['localhost', 'localhost:7700', '127.0.0.1', '127.0.0.1:7700', '127.1.2.3', '[::1]:7700', 'LOCALHOST'])('%s is served', async (host) => {
    const { u: upstream, s: sidecar } = await fx.start({ body: allow('k', Date.now() + 60_000) });
    const r = await raw(sidecar.handle.urls.decision, post('/v1/authorization/check', host));
    expect(r.status).toBe(200);
  });

  it.each(['evil.example', 'evil.example:7700', '127.0.0.1.evil.example', 'localhost.evil.example'])('%s is refused (400 host) on every route but forward-auth, and the service is not asked', async (host) => {
    const { u: upstream, s: sidecar } = await fx.start({ body: allow('k', Date.now() + 60_000) });
    const url = sidecar.handle.urls.decision;
    for (const request of [post('/v1/authorization/check', host), post('/sidecar/authorization/check-batch', host, '{"checks":[{"userReference":"u","configKey":"k"}]}'), `GET /v1/customers/c1 HTTP/1.1\r\nhost: ${host}\r\nconnection: close\r\n\r\n`, `DELETE /sidecar/cache HTTP/1.1\r\nhost: ${host}\r\nconnection: close\r\n\r\n`]) {
      const r = await raw(url, request);
      expect(r.status).toBe(400);
      expect(JSON.parse(r.body)).toMatchObject({ decision: 'DENY', error: 'invalid_request', field: 'host' });
    }
    expect(upstream.count).toBe(0);
    // A proxy passes the original request's Host to forward-auth: served.
    const fa = await raw(url, `GET /sidecar/forward-auth?configKey=k HTTP/1.1\r\nhost: ${host}\r\nx-user-reference: u\r\nconnection: close\r\n\r\n`);
    expect(fa.status).toBe(200);
  });

  it('--allowed-host adds a name', async () => {
    const { u: upstream, s: sidecar } = await fx.start({ body: allow('k', Date.now() + 60_000) }, { 'allowed-host': 'consent-sidecar.internal' });
    expect((await raw(sidecar.handle.urls.decision, post('/v1/authorization/check', 'consent-sidecar.internal:7700'))).status).toBe(200);
    expect((await raw(sidecar.handle.urls.decision, post('/v1/authorization/check', 'other.internal'))).status).toBe(400);
  });

  it('a Host served before lets no other through, nor itself twice in one request', async () => {
    const { u: upstream, s: sidecar } = await fx.start({ body: allow('k', Date.now() + 60_000) });
    const url = sidecar.handle.urls.decision;
    expect((await raw(url, post('/v1/authorization/check', 'localhost:7700'))).status).toBe(200);
    expect((await raw(url, post('/v1/authorization/check', 'evil.example:7700'))).status).toBe(400);
    expect((await raw(url, post('/v1/authorization/check', 'localhost:7700'))).status).toBe(200);
    const twice = await raw(url, `GET /v1/customers/c1 HTTP/1.1\r\nhost: localhost:7700\r\nhost: localhost:7700\r\nconnection: close\r\n\r\n`);
    expect(twice.status).toBe(400);
    expect(upstream.count).toBe(1);
  });

  it('two Host fields are refused', async () => {
    const { u: upstream, s: sidecar } = await fx.start({ body: allow('k', Date.now() + 60_000) });
    const r = await raw(sidecar.handle.urls.decision, `GET /v1/customers/c1 HTTP/1.1\r\nhost: localhost\r\nhost: evil.example\r\nconnection: close\r\n\r\n`);
    expect(r.status).toBe(400);
    expect(upstream.count).toBe(0);
  });
});

describe('the passthrough as a proxy', () => {
  // TRACK is no method node's parser knows: refused as a malformed request (400) before any route.
  it.each([['TRACE', 405], ['TRACK', 400], ['CONNECT', 405], ['PROPFIND', 405]] as const)('%s is refused (%i) and never sent (the key would travel with it)', async (method, status) => {
    const { u: upstream, s: sidecar } = await fx.start({ status: 200, body: 'echo' });
    const r = await raw(sidecar.handle.urls.decision, `${method} /v1/anything HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n`);
    expect(r.status).toBe(status);
    expect(upstream.count).toBe(0);
  });

  it('TRACE on a /v1 path: 405 naming the methods passed through', async () => {
    const { u: upstream, s: sidecar } = await fx.start({ status: 200, body: 'echo' });
    const r = await sidecar.send('TRACE', '/v1/anything');
    expect(r.status).toBe(405);
    expect(r.headers.allow).toBe('GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS');
    expect(r.source).toBe('rejected');
    expect(upstream.count).toBe(0);
  });

  it('hop-by-hop headers and those Connection names are dropped both ways; the service cannot set x-consent-* headers', async () => {
    const { u: upstream, s: sidecar } = await fx.start({
      status: 200,
      headers: { connection: 'x-upstream-hop', 'x-upstream-hop': 'secret-hop', 'keep-alive': 'timeout=5', 'x-consent-decision-source': 'cache', 'x-consent-valid-until': '99999999999999', 'x-kept': 'yes' },
      body: 'ok',
    });
    const r = await raw(
      sidecar.handle.urls.decision,
      `GET /v1/customers/c1 HTTP/1.1\r\nhost: localhost\r\nconnection: close, x-app-hop\r\nx-app-hop: private\r\nx-app-kept: yes\r\nkeep-alive: timeout=1\r\nte: trailers\r\nupgrade: websocket\r\n\r\n`,
    );
    expect(r.status).toBe(200);
    const seen = upstream.requests[0]!.headers;
    expect(seen['x-app-hop']).toBeUndefined();
    expect(seen['keep-alive']).toBeUndefined();
    expect(seen.upgrade).toBeUndefined();
    expect(seen.te).toBeUndefined();
    expect(seen['x-app-kept']).toBe('yes');
    expect(r.head).not.toContain('x-upstream-hop');
    expect(r.head).not.toContain('x-consent-valid-until');
    expect(r.head).toContain('x-consent-decision-source: upstream');
    expect(r.head).toContain('x-kept: yes');
  });
});

describe("what node's parser refuses, before any route", () => {
  it('is answered JSON with a decision id, counted once as a rejected check, and never sent', async () => {
    const { u: upstream, s: sidecar } = await fx.start({ body: allow('k', Date.now() + 60_000) });
    const url = sidecar.handle.urls.decision;
    const before = await sidecar.metric('consent_sidecar_decisions_total', { route: 'check', decision: 'deny', source: 'rejected' });
    const cases = [
      // A check whose chunked body is malformed: the route saw the headers, node's parser the bad chunk.
      [`POST /v1/authorization/check HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\nZZ\r\n${CHECK}\r\n0\r\n\r\n`, 400, 'request'],
      ['GET /v1/customers/a\x01b HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n', 400, 'path'],
      [`POST /v1/authorization/check HTTP/1.1\r\nhost: localhost\r\nx-big: ${'a'.repeat(20_000)}\r\ncontent-length: 0\r\n\r\n`, 431, 'request'],
      ['CONNECT 127.0.0.1:443 HTTP/1.1\r\nhost: 127.0.0.1:443\r\n\r\n', 405, 'method'],
    ] as const;
    const ids = new Set<string>();
    for (const [request, status, field] of cases) {
      const r = await raw(url, request);
      expect([r.status, JSON.parse(r.body)]).toEqual([status, expect.objectContaining({ decision: 'DENY', error: 'invalid_request', field })]);
      expect(r.head).toContain('x-consent-decision-source: rejected');
      const id = /x-consent-decision-id: ([^\r\n]+)/.exec(r.head)?.[1];
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      ids.add(id!);
      if (status === 405) expect(r.head).toContain('allow: get, head, post, put, patch, delete, options');
    }
    expect(ids.size).toBe(cases.length);
    expect(await sidecar.metric('consent_sidecar_decisions_total', { route: 'check', decision: 'deny', source: 'rejected' })).toBe(before + cases.length);
    expect(upstream.count).toBe(0);
  });
});
