import { connect } from 'node:net';
import { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startTestSidecar, type TestSidecar } from '../../helpers/sidecar.js';
import { allow, deny, preDeny, startUpstream, type ScriptedUpstream } from '../../helpers/upstream.js';

// Every row of CONTRACT.md's decision table, through the real sidecar and a real upstream.

const KEY = 'flow-marketing';
const USER = 'user-table-1';

let upstream: ScriptedUpstream;
let sidecar: TestSidecar;

beforeEach(async () => {
  upstream = await startUpstream();
  sidecar = await startTestSidecar(upstream.url);
});

afterEach(async () => {
  await sidecar.close();
  await upstream.close();
});

describe('ALLOW (fresh, then cached)', () => {
  it('answers the fresh ALLOW from the upstream, then the same body from the cache without calling it', async () => {
    const validUntil = Date.now() + 60_000;
    upstream.reply({ body: allow(KEY, validUntil) });

    const fresh = await sidecar.check({ userReference: USER, configKey: KEY });
    expect(fresh.status).toBe(200);
    expect(fresh.source).toBe('upstream');
    expect(fresh.json).toEqual({ decision: 'ALLOW', configKey: KEY, validUntil });
    expect(fresh.headers['content-type']).toMatch(/^application\/json/);

    const cached = await sidecar.check({ userReference: USER, configKey: KEY });
    expect(cached.status).toBe(200);
    expect(cached.source).toBe('cache');
    expect(cached.text).toBe(fresh.text);
    expect(upstream.checks).toBe(1);
  });

  it('sends the service exactly the two documented fields, with the API key as Bearer', async () => {
    upstream.reply({ body: allow(KEY, Date.now() + 60_000) });
    await sidecar.check({ userReference: USER, configKey: KEY, extra: 'dropped', nested: { a: 1 } });
    expect(upstream.requests).toHaveLength(1);
    const seen = upstream.requests[0]!;
    expect(seen.method).toBe('POST');
    expect(seen.url).toBe('/v1/authorization/check');
    expect(JSON.parse(seen.body)).toEqual({ userReference: USER, configKey: KEY });
    expect(seen.headers.authorization).toBe('Bearer test-api-key');
  });

  it('Cache-Control: no-cache skips the cache in any spelling: case, in a list, in a second field; a look-alike token does not', async () => {
    upstream.reply({ body: allow(KEY, Date.now() + 60_000) });
    expect((await sidecar.check({ userReference: USER, configKey: KEY })).source).toBe('upstream');
    const { request } = await import('undici');
    const ask = async (headers: string[]): Promise<string | undefined> => {
      const res = await request(`${sidecar.handle.urls.decision}/v1/authorization/check`, {
        method: 'POST',
        headers: ['content-type', 'application/json', ...headers],
        body: JSON.stringify({ userReference: USER, configKey: KEY }),
      });
      await res.body.text();
      return res.headers['x-consent-decision-source'] as string | undefined;
    };
    expect(await ask(['Cache-Control', 'No-Cache'])).toBe('upstream');
    expect(await ask(['cache-control', 'max-age=0, no-cache'])).toBe('upstream');
    expect(await ask(['Cache-Control', 'max-age=0', 'CACHE-CONTROL', 'no-cache'])).toBe('upstream');
    expect(await ask(['cache-control', 'no-cache-please'])).toBe('cache');
    expect(await ask(['x-cache-control', 'no-cache'])).toBe('cache');
    expect(await ask([])).toBe('cache');
    expect(upstream.checks).toBe(4);
  });

  it('keys the cache on the whole request: another configKey or another user is a miss', async () => {
    upstream.reply((r) => {
      const { configKey } = JSON.parse(r.body) as { configKey: string };
      return { body: allow(configKey, Date.now() + 60_000) };
    });
    await sidecar.check({ userReference: USER, configKey: KEY });
    expect((await sidecar.check({ userReference: USER, configKey: 'flow-other' })).source).toBe('upstream');
    expect((await sidecar.check({ userReference: 'user-table-2', configKey: KEY })).source).toBe('upstream');
    // The length prefix keeps ("ab","c") and ("a","bc") apart.
    await sidecar.check({ userReference: 'ab', configKey: 'c' });
    expect((await sidecar.check({ userReference: 'a', configKey: 'bc' })).source).toBe('upstream');
    expect(upstream.checks).toBe(5);
    expect((await sidecar.check({ userReference: USER, configKey: KEY })).source).toBe('cache');
  });

  it('an ALLOW in another key order, with whitespace and extra fields, is answered with the three documented fields and the service\'s values', async () => {
    const validUntil = Date.now() + 60_000;
    upstream.reply({ body: `{ "validUntil": ${validUntil}, "extra": {"x": 1}, "configKey": "${KEY}", "decision": "ALLOW" }` });
    const fresh = await sidecar.check({ userReference: USER, configKey: KEY });
    expect(fresh.status).toBe(200);
    expect(fresh.json).toEqual({ decision: 'ALLOW', configKey: KEY, validUntil });
    const cached = await sidecar.check({ userReference: USER, configKey: KEY });
    expect(cached.source).toBe('cache');
    expect(cached.text).toBe(fresh.text);
  });
});

describe('evaluated denial', () => {
  it('answers 200 {decision:"DENY", configKey} and never caches it', async () => {
    upstream.reply({ body: deny(KEY) });
    for (let i = 1; i <= 2; i++) {
      const r = await sidecar.check({ userReference: USER, configKey: KEY });
      expect(r.status).toBe(200);
      expect(r.source).toBe('upstream');
      expect(r.json).toEqual({ decision: 'DENY', configKey: KEY });
      expect(upstream.checks).toBe(i);
    }
  });
});

describe('pre-evaluation denial', () => {
  const reasons = ['customer_not_found', 'config_not_published', 'ambiguous_config', 'config_material_unavailable'];

  it.each(reasons)('answers 200 {decision:"DENY", reason:"%s"}, never cached, counted by reason', async (reason) => {
    upstream.reply({ body: preDeny(reason) });
    for (let i = 1; i <= 2; i++) {
      const r = await sidecar.check({ userReference: USER, configKey: KEY });
      expect(r.status).toBe(200);
      expect(r.source).toBe('upstream');
      expect(r.json).toEqual({ decision: 'DENY', reason });
      expect(upstream.checks).toBe(i);
    }
    expect(await sidecar.metric('consent_sidecar_pre_evaluation_denials_total', { reason })).toBe(2);
    expect(await sidecar.metric('consent_sidecar_pre_evaluation_denials_total', { reason: 'other' })).toBe(0);
  });

  it('passes an unknown reason through to the app and counts it as "other"', async () => {
    upstream.reply({ body: preDeny('tenant_suspended') });
    const r = await sidecar.check({ userReference: USER, configKey: KEY });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ decision: 'DENY', reason: 'tenant_suspended' });
    await sidecar.check({ userReference: USER, configKey: KEY });
    expect(upstream.checks).toBe(2);
    const text = await sidecar.metricsText();
    expect(text).not.toContain('tenant_suspended');
    expect(await sidecar.metric('consent_sidecar_pre_evaluation_denials_total', { reason: 'other' })).toBe(2);
    expect(await sidecar.metric('consent_sidecar_pre_evaluation_denials_total')).toBe(2);
  });
});

describe('503 when no decision could be had', () => {
  it('answers {decision:"DENY", error:<cause>} with source fail-closed, and caches nothing', async () => {
    upstream.reply({ status: 500, body: { error: 'boom' } });
    const r = await sidecar.check({ userReference: USER, configKey: KEY });
    expect(r.status).toBe(503);
    expect(r.source).toBe('fail-closed');
    expect(r.json).toEqual({ decision: 'DENY', error: 'upstream_5xx' });
    expect(r.headers['cache-control']).toBe('no-store');
    upstream.reply({ body: allow(KEY, Date.now() + 60_000) });
    expect((await sidecar.check({ userReference: USER, configKey: KEY })).source).toBe('upstream');
  });
});

describe('400 for a bad request (the service is not called)', () => {
  const long = 'x'.repeat(1025);
  const cases: [string, string][] = [
    ['not JSON', '{"userReference": '],
    ['empty body', ''],
    ['a JSON array', JSON.stringify([USER, KEY])],
    ['a JSON string', JSON.stringify('hello')],
    ['JSON null', 'null'],
    ['a JSON number', '42'],
    ['userReference missing', JSON.stringify({ configKey: KEY })],
    ['configKey missing', JSON.stringify({ userReference: USER })],
    ['both missing', JSON.stringify({})],
    ['userReference a number', JSON.stringify({ userReference: 7, configKey: KEY })],
    ['configKey a number', JSON.stringify({ userReference: USER, configKey: 7 })],
    ['userReference null', JSON.stringify({ userReference: null, configKey: KEY })],
    ['configKey an object', JSON.stringify({ userReference: USER, configKey: { k: KEY } })],
    ['configKey an array', JSON.stringify({ userReference: USER, configKey: [KEY] })],
    ['userReference a boolean', JSON.stringify({ userReference: true, configKey: KEY })],
    ['userReference empty', JSON.stringify({ userReference: '', configKey: KEY })],
    ['configKey empty', JSON.stringify({ userReference: USER, configKey: '' })],
    ['userReference over 1024 characters', JSON.stringify({ userReference: long, configKey: KEY })],
    ['configKey over 1024 characters', JSON.stringify({ userReference: USER, configKey: long })],
  ];

  it.each(cases)('%s → 400 invalid_request, source rejected', async (_name, body) => {
    upstream.reply({ body: allow(KEY, Date.now() + 60_000) });
    const r = await sidecar.check(body);
    expect(r.status).toBe(400);
    expect(r.source).toBe('rejected');
    expect(r.json).toMatchObject({ decision: 'DENY', error: 'invalid_request' });
    expect(upstream.count).toBe(0);
  });

  it('an oversize body (declared Content-Length) → 400 and the service is not called', async () => {
    const body = JSON.stringify({ userReference: USER, configKey: KEY, pad: 'p'.repeat(20_000) });
    const r = await sidecar.check(body);
    expect(r.status).toBe(400);
    expect(r.source).toBe('rejected');
    expect(r.json).toMatchObject({ decision: 'DENY', error: 'invalid_request' });
    expect(upstream.count).toBe(0);
  });

  it('an oversize chunked body (no Content-Length) → 400 and the service is not called', async () => {
    const { Client } = await import('undici');
    const client = new Client(sidecar.handle.urls.decision);
    try {
      const payload = JSON.stringify({ userReference: USER, configKey: KEY, pad: 'p'.repeat(40_000) });
      async function* gen(): AsyncGenerator<Buffer> {
        for (let i = 0; i < payload.length; i += 4096) yield Buffer.from(payload.slice(i, i + 4096));
      }
      const res = await client.request({ method: 'POST', path: '/v1/authorization/check', body: Readable.from(gen()) });
      const text = await res.body.text();
      expect(res.statusCode).toBe(400);
      expect(res.headers['x-consent-decision-source']).toBe('rejected');
      expect(JSON.parse(text)).toMatchObject({ decision: 'DENY', error: 'invalid_request' });
    } catch (err) {
      // The sidecar may close the connection while the body is still being sent; that is not an ALLOW.
      expect((err as { code?: string }).code).toMatch(/^(UND_ERR_SOCKET|ECONNRESET|EPIPE)$/);
    } finally {
      await client.destroy();
    }
    expect(upstream.count).toBe(0);
  });

  it('a body exactly at the limit is accepted (the limit is not off by one)', async () => {
    upstream.reply({ body: allow(KEY, Date.now() + 60_000) });
    const base = JSON.stringify({ userReference: USER, configKey: KEY, pad: '' });
    const body = JSON.stringify({ userReference: USER, configKey: KEY, pad: 'p'.repeat(16_384 - base.length) });
    expect(Buffer.byteLength(body)).toBe(16_384);
    const r = await sidecar.check(body);
    expect(r.status).toBe(200);
    expect(upstream.checks).toBe(1);
  });
});

describe('the request body, however it arrives', () => {
  /** Writes `parts` on one raw connection, each after the previous one is flushed, and reads the whole reply (the sidecar is asked to close). */
  function rawExchange(parts: string[]): Promise<string> {
    const { port } = new URL(sidecar.handle.urls.decision);
    return new Promise((resolve, reject) => {
      const sock = connect(Number(port), '127.0.0.1');
      let data = '';
      sock.setEncoding('latin1');
      sock.on('data', (d: string) => (data += d));
      sock.on('end', () => resolve(data));
      sock.on('error', reject);
      const next = (i: number): void => {
        if (i < parts.length) sock.write(parts[i]!, () => setImmediate(next, i + 1));
      };
      sock.on('connect', () => next(0));
    });
  }
  const head = (extra: string): string => `POST /v1/authorization/check HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\nconnection: close\r\n${extra}\r\n`;
  const oneResponse = (raw: string): { status: number; body: Record<string, unknown> } => {
    expect(raw.match(/^HTTP\/1\.1 /gm), raw).toHaveLength(1);
    const [statusLine = '', ...rest] = raw.split('\r\n');
    return { status: Number(statusLine.split(' ')[1]), body: JSON.parse(rest.join('\r\n').split('\r\n\r\n')[1] ?? '') as Record<string, unknown> };
  };

  it('a Content-Length body in several writes is decided once, on the whole of it', async () => {
    upstream.reply({ body: allow(KEY, Date.now() + 60_000) });
    const body = JSON.stringify({ userReference: USER, configKey: KEY });
    const r = oneResponse(await rawExchange([head(`content-length: ${body.length}\r\n`), body.slice(0, 7), body.slice(7, 30), body.slice(30)]));
    expect(r).toMatchObject({ status: 200, body: { decision: 'ALLOW', configKey: KEY } });
    expect(JSON.parse(upstream.requests[0]!.body)).toEqual({ userReference: USER, configKey: KEY });
    expect(upstream.checks).toBe(1);
  });

  it('a chunked body (no Content-Length) in several chunks is decided at its end', async () => {
    upstream.reply({ body: allow(KEY, Date.now() + 60_000) });
    const body = JSON.stringify({ userReference: USER, configKey: KEY });
    const chunk = (s: string): string => `${s.length.toString(16)}\r\n${s}\r\n`;
    const r = oneResponse(await rawExchange([head('transfer-encoding: chunked\r\n'), chunk(body.slice(0, 10)), chunk(body.slice(10)), '0\r\n\r\n']));
    expect(r).toMatchObject({ status: 200, body: { decision: 'ALLOW', configKey: KEY } });
    expect(upstream.checks).toBe(1);
  });

  it('Content-Length: 0 and an empty chunked body are answered 400, field body', async () => {
    for (const parts of [[head('content-length: 0\r\n')], [head('transfer-encoding: chunked\r\n'), '0\r\n\r\n']]) {
      const r = oneResponse(await rawExchange(parts));
      expect(r.status).toBe(400);
      expect(r.body).toMatchObject({ decision: 'DENY', error: 'invalid_request' });
    }
    expect(upstream.count).toBe(0);
  });

  it('a client gone mid-body is never answered nor sent to the service, and the sidecar serves on', async () => {
    const body = JSON.stringify({ userReference: USER, configKey: KEY });
    const { port } = new URL(sidecar.handle.urls.decision);
    const sock = connect(Number(port), '127.0.0.1');
    await new Promise<void>((resolve) => sock.write(head(`content-length: ${body.length}\r\n`) + body.slice(0, 12), () => resolve()));
    sock.destroy();
    // The request the sidecar half-read is aborted on its side, with no 'error' listener on it.
    upstream.reply({ body: allow(KEY, Date.now() + 60_000) });
    expect((await sidecar.check({ userReference: USER, configKey: KEY })).json).toMatchObject({ decision: 'ALLOW' });
    expect(upstream.checks).toBe(1);
    expect(JSON.parse(upstream.requests[0]!.body)).toEqual({ userReference: USER, configKey: KEY });
  });
});

describe('x-consent-decision-source on every answer', () => {
  it('is one of cache | upstream | fail-closed | rejected, matching the answer', async () => {
    upstream.reply({ body: allow(KEY, Date.now() + 60_000) });
    const seen = new Set<string | undefined>();
    seen.add((await sidecar.check({ userReference: USER, configKey: KEY })).source);
    seen.add((await sidecar.check({ userReference: USER, configKey: KEY })).source);
    upstream.reply({ status: 502 });
    seen.add((await sidecar.check({ userReference: 'user-other', configKey: KEY })).source);
    seen.add((await sidecar.check('nope')).source);
    expect([...seen].sort()).toEqual(['cache', 'fail-closed', 'rejected', 'upstream']);
  });
});
