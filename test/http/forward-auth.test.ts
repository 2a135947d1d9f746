import { createHmac } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Pool } from 'undici';
import { DecisionMetrics } from '../../src/decision/index.js';
import { startTestSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { allow, CHECK_PATH, deny, preDeny, startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { startApp, type FakeApp } from '../helpers/webhooks.js';

// /sidecar/forward-auth on the real sidecar in front of a scripted consent service on loopback:
// each answer a proxy can get, where the user reference and configKey may come from, and the
// Envoy ext_authz form (original method, original path appended to the prefix).

const KEY = 'marketing-email';

let upstream: ScriptedUpstream | undefined;
let sidecar: TestSidecar | undefined;
let pool: Pool | undefined;
let app: FakeApp | undefined;

afterEach(async () => {
  await pool?.close();
  await sidecar?.close();
  await upstream?.close();
  await app?.close();
  [pool, sidecar, upstream, app] = [undefined, undefined, undefined, undefined];
});

async function start(flags: Record<string, string> = {}): Promise<{ u: ScriptedUpstream; s: TestSidecar }> {
  upstream = await startUpstream();
  sidecar = await startTestSidecar(upstream.url, flags);
  pool = new Pool(sidecar.handle.urls.decision);
  return { u: upstream, s: sidecar };
}

interface Got {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** One forward-auth request; `headers` is a flat name/value list so a header can be repeated. */
async function fa(path: string, headers: string[] = [], method = 'GET', body?: string): Promise<Got> {
  const res = await pool!.request({ method: method as 'GET', path, headers, body: body ?? null });
  return { status: res.statusCode, headers: res.headers as Got['headers'], text: await res.body.text() };
}

/** The bodies the service was asked, parsed. */
const asked = (u: ScriptedUpstream): unknown[] => u.requests.filter((r) => r.url === CHECK_PATH).map((r) => JSON.parse(r.body) as unknown);

describe('forward-auth answers', () => {
  it('ALLOW: 200 with x-consent-valid-until, from the service then from the cache; a client no-cache does not bypass it', async () => {
    const { u, s } = await start();
    const validUntil = Date.now() + 60_000;
    u.reply({ body: allow(KEY, validUntil) });
    const first = await fa(`/sidecar/forward-auth?configKey=${KEY}`, ['x-user-reference', 'alice']);
    expect(first.status).toBe(200);
    expect(first.headers['x-consent-valid-until']).toBe(String(validUntil));
    expect(first.headers['x-consent-decision-source']).toBe('upstream');
    expect(first.text).toBe('allow\n');
    const second = await fa(`/sidecar/forward-auth?configKey=${KEY}`, ['x-user-reference', 'alice', 'cache-control', 'no-cache']);
    expect(second.status).toBe(200);
    expect(second.headers['x-consent-decision-source']).toBe('cache');
    expect(second.headers['x-consent-valid-until']).toBe(String(validUntil));
    expect(asked(u)).toEqual([{ userReference: 'alice', configKey: KEY }]);
    expect(await s.metric('consent_sidecar_decisions_total', { decision: 'allow', route: 'forward_auth' })).toBe(2);
    expect(await s.metric('consent_sidecar_decisions_total', { route: 'check' })).toBe(0);
  });

  it('evaluated DENY: 403 with x-consent-deny-reason evaluated, never cached', async () => {
    const { u } = await start();
    u.reply({ body: deny(KEY) });
    for (let i = 0; i < 2; i++) {
      const r = await fa(`/sidecar/forward-auth?configKey=${KEY}`, ['x-user-reference', 'bob']);
      expect(r.status).toBe(403);
      expect(r.headers['x-consent-deny-reason']).toBe('evaluated');
      expect(r.headers['x-consent-valid-until']).toBeUndefined();
      expect(r.text).toBe('deny: evaluated\n');
    }
    expect(u.checks).toBe(2);
  });

  it('pre-evaluation DENY: 403 with the reason, counted and logged like the check; an odd reason reads as other', async () => {
    const { u, s } = await start();
    u.reply({ body: preDeny('config_not_published') });
    const r = await fa(`/sidecar/forward-auth?configKey=${KEY}`, ['x-user-reference', 'carol']);
    expect(r.status).toBe(403);
    expect(r.headers['x-consent-deny-reason']).toBe('config_not_published');
    expect(await s.metric('consent_sidecar_pre_evaluation_denials_total', { reason: 'config_not_published' })).toBe(1);
    u.reply({ body: preDeny('not a token\twith spaces') });
    const odd = await fa(`/sidecar/forward-auth?configKey=${KEY}`, ['x-user-reference', 'carol']);
    expect(odd.status).toBe(403);
    expect(odd.headers['x-consent-deny-reason']).toBe('other');
  });

  it.each([
    ['the service answers 500', { status: 500 }, 'upstream_5xx'],
    ['the connection is reset', { fault: 'reset' as const }, 'upstream_unreachable'],
    ['the service never answers', { fault: 'hang' as const }, 'upstream_timeout'],
    ['an ALLOW for another configKey', { body: allow('other-key', Date.now() + 60_000) }, 'contradictory_response'],
  ])('no decision (%s): 503 with x-consent-decision-error, counted by cause', async (_name, reply, cause) => {
    // A short deadline only where nothing can race it: the service that never answers.
    const { u, s } = await start(cause === 'upstream_timeout' ? { 'upstream-timeout-ms': '300' } : {});
    u.reply(reply);
    const r = await fa(`/sidecar/forward-auth?configKey=${KEY}`, ['x-user-reference', 'dave']);
    expect(r.status).toBe(503);
    expect(r.headers['x-consent-decision-error']).toBe(cause);
    expect(r.headers['x-consent-decision-source']).toBe('fail-closed');
    expect(r.text).toBe(`no decision: ${cause}\n`);
    expect(await s.metric('consent_sidecar_fail_closed_total', { cause })).toBe(1);
    expect(await s.metric('consent_sidecar_decisions_total', { decision: 'deny', source: 'fail_closed', route: 'forward_auth' })).toBe(1);
  });

  it('the circuit breaker applies: once open, 503 circuit_open without asking the service', async () => {
    const { u } = await start({ 'breaker-failure-threshold': '1', 'breaker-cooldown-ms': '60000' });
    u.reply({ status: 500 });
    expect((await fa(`/sidecar/forward-auth?configKey=${KEY}`, ['x-user-reference', 'erin'])).headers['x-consent-decision-error']).toBe('upstream_5xx');
    const r = await fa(`/sidecar/forward-auth?configKey=${KEY}`, ['x-user-reference', 'erin']);
    expect(r.status).toBe(503);
    expect(r.headers['x-consent-decision-error']).toBe('circuit_open');
    expect(u.checks).toBe(1);
  });

  it.each<[string, string, string[], RegExp]>([
    ['no user header', `/sidecar/forward-auth?configKey=${KEY}`, [], /^invalid request: userReference: userReference is missing \(header x-user-reference\)/],
    ['an empty user header', `/sidecar/forward-auth?configKey=${KEY}`, ['x-user-reference', ''], /userReference is missing/],
    ['the user header twice', `/sidecar/forward-auth?configKey=${KEY}`, ['x-user-reference', 'alice', 'X-User-Reference', 'mallory'], /userReference: header x-user-reference is given more than once/],
    ['a too long user reference', `/sidecar/forward-auth?configKey=${KEY}`, ['x-user-reference', 'a'.repeat(1025)], /userReference is longer than 1024/],
    ['no configKey', '/sidecar/forward-auth', ['x-user-reference', 'alice'], /^invalid request: configKey: configKey is missing/],
    ['configKey twice in the query', `/sidecar/forward-auth?configKey=${KEY}&configKey=other`, ['x-user-reference', 'alice'], /configKey is given more than once/],
    ['query and header differ', `/sidecar/forward-auth?configKey=${KEY}`, ['x-user-reference', 'alice', 'x-consent-config-key', 'other'], /configKey: query parameter configKey and header x-consent-config-key differ/],
    ['the configKey header twice', '/sidecar/forward-auth', ['x-user-reference', 'alice', 'x-consent-config-key', KEY, 'x-consent-config-key', KEY], /header x-consent-config-key is given more than once/],
    ['beneath the path, a configKey only in the original query', `/sidecar/forward-auth/orders?configKey=${KEY}`, ['x-user-reference', 'alice'], /configKey is missing/],
  ])('400 naming what is wrong (%s); the service is not asked', async (_name, path, headers, detail) => {
    const { u, s } = await start();
    u.reply({ body: allow(KEY, Date.now() + 60_000) });
    const r = await fa(path, headers);
    expect(r.status).toBe(400);
    expect(r.headers['x-consent-decision-error']).toBe('invalid_request');
    expect(r.headers['x-consent-decision-source']).toBe('rejected');
    expect(r.text).toMatch(detail);
    expect(r.text).not.toContain('mallory');
    expect(u.count).toBe(0);
    expect(await s.metric('consent_sidecar_decisions_total', { source: 'rejected', route: 'forward_auth' })).toBe(1);
  });

  it('takes the configKey from the header, or from both when they agree, and the user header named by --forward-auth-user-header', async () => {
    const { u } = await start({ 'forward-auth-user-header': 'X-Auth-Request-User' });
    u.reply({ body: allow(KEY, Date.now() + 60_000) });
    expect((await fa('/sidecar/forward-auth', ['x-auth-request-user', 'frank', 'x-consent-config-key', KEY])).status).toBe(200);
    expect((await fa(`/sidecar/forward-auth?configKey=${KEY}`, ['X-Auth-Request-User', 'grace', 'x-consent-config-key', KEY])).status).toBe(200);
    // The default header means nothing once another is configured.
    expect((await fa(`/sidecar/forward-auth?configKey=${KEY}`, ['x-user-reference', 'frank'])).status).toBe(400);
    expect(asked(u)).toEqual([
      { userReference: 'frank', configKey: KEY },
      { userReference: 'grace', configKey: KEY },
    ]);
  });

  it('a blank configKey header is absent (the one header rule, src/lib/headers.ts): the query\'s configKey is used, not refused as differing', async () => {
    const { u } = await start();
    u.reply({ body: allow(KEY, Date.now() + 60_000) });
    expect((await fa(`/sidecar/forward-auth?configKey=${KEY}`, ['x-user-reference', 'heidi', 'x-consent-config-key', ' '])).status).toBe(200);
    expect(asked(u)).toEqual([{ userReference: 'heidi', configKey: KEY }]);
    // blank and a value, twice given: still ambiguous, refused
    expect((await fa(`/sidecar/forward-auth?configKey=${KEY}`, ['x-user-reference', 'heidi', 'x-consent-config-key', '', 'x-consent-config-key', KEY])).status).toBe(400);
  });

  it('shares the cache and coalescing with the check route', async () => {
    const { u, s } = await start();
    u.reply({ body: allow(KEY, Date.now() + 60_000), delayMs: 100 });
    const [viaCheck, viaProxy] = await Promise.all([
      s.check({ userReference: 'heidi', configKey: KEY }),
      fa(`/sidecar/forward-auth?configKey=${KEY}`, ['x-user-reference', 'heidi']),
    ]);
    expect(viaCheck.json?.decision).toBe('ALLOW');
    expect(viaProxy.status).toBe(200);
    expect(u.checks).toBe(1);
    expect((await fa(`/sidecar/forward-auth?configKey=${KEY}`, ['x-user-reference', 'heidi'])).headers['x-consent-decision-source']).toBe('cache');
    // A manual purge reaches forward-auth too.
    expect((await s.send('DELETE', '/sidecar/cache?userReference=heidi')).json).toEqual({ purged: 1 });
    expect((await fa(`/sidecar/forward-auth?configKey=${KEY}`, ['x-user-reference', 'heidi'])).headers['x-consent-decision-source']).toBe('upstream');
  });
});

describe('forward-auth request forms', () => {
  it.each(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])(
    'Envoy ext_authz form, %s /sidecar/forward-auth/<original path>?<original query>: the configKey from the header, the original query ignored',
    async (method) => {
      const { u } = await start();
      u.reply({ body: allow(KEY, Date.now() + 60_000) });
      const r = await fa(`/sidecar/forward-auth/orders/42/items?configKey=evil&page=2`, ['x-user-reference', 'ivan', 'x-consent-config-key', KEY], method);
      expect(r.status).toBe(200);
      expect(r.headers['x-consent-valid-until']).toMatch(/^\d+$/);
      expect(asked(u)).toEqual([{ userReference: 'ivan', configKey: KEY }]);
    },
  );

  it('Traefik ForwardAuth form: GET on the configured address with X-Forwarded-*; the original URI is never read', async () => {
    const { u } = await start();
    u.reply({ body: allow(KEY, Date.now() + 60_000) });
    const r = await fa(`/sidecar/forward-auth?configKey=${KEY}`, [
      'x-user-reference', 'lena',
      'x-forwarded-method', 'DELETE',
      'x-forwarded-proto', 'https',
      'x-forwarded-host', 'shop.example.com',
      'x-forwarded-uri', '/sidecar/forward-auth?configKey=evil',
    ]);
    expect(r.status).toBe(200);
    expect(asked(u)).toEqual([{ userReference: 'lena', configKey: KEY }]);
  });

  it('a trailing slash and a body sent along are fine; the connection stays usable', async () => {
    const { u } = await start();
    u.reply({ body: deny(KEY) });
    const withBody = await fa('/sidecar/forward-auth/', ['x-user-reference', 'judy', 'x-consent-config-key', KEY, 'content-type', 'application/json'], 'POST', '{"a":1}');
    expect(withBody.status).toBe(403);
    const again = await fa('/sidecar/forward-auth/', ['x-user-reference', 'judy', 'x-consent-config-key', KEY]);
    expect(again.status).toBe(403);
  });

  it.each(['/sidecar/forward-authz', '/SIDECAR/forward-auth', '/sidecar//forward-auth', '/sidecar/forward-auth%2f'])(
    'a look-alike target (%s) is not forward-auth: never 200, the service never asked',
    async (path) => {
      const { u } = await start();
      u.reply({ body: allow(KEY, Date.now() + 60_000) });
      const r = await fa(`${path}?configKey=${KEY}`, ['x-user-reference', 'ken']);
      expect(r.status).not.toBe(200);
      expect(r.status).toBeGreaterThanOrEqual(400);
      expect(u.count).toBe(0);
    },
  );
});

describe('forward-auth and the operator tools of the check', () => {
  it('observes the decision duration of every answer, by source', async () => {
    const { u, s } = await start();
    u.reply({ body: allow(KEY, Date.now() + 60_000) });
    await fa(`/sidecar/forward-auth?configKey=${KEY}`, ['x-user-reference', 'mia']);
    await fa(`/sidecar/forward-auth?configKey=${KEY}`, ['x-user-reference', 'mia']);
    await fa('/sidecar/forward-auth', ['x-user-reference', 'mia']);
    expect(await s.metric('consent_sidecar_decision_duration_seconds_count', { source: 'upstream' })).toBe(1);
    expect(await s.metric('consent_sidecar_decision_duration_seconds_count', { source: 'cache' })).toBe(1);
    expect(await s.metric('consent_sidecar_decision_duration_seconds_count', { source: 'rejected' })).toBe(1);
  });

  it('writes decisions to the decision log with route forward_auth (a keyed hash, never the reference; no line for a 400)', async () => {
    const hashKey = 'forward-auth-log-key-0123456789';
    const file = join(mkdtempSync(join(tmpdir(), 'cs-fa-log-')), 'decisions.jsonl');
    const { u, s } = await start({ 'decision-log': file, 'decision-log-hash-key': hashKey });
    u.enqueue({ body: allow(KEY, Date.now() + 60_000) }, { body: deny(KEY) }, { status: 500 });
    await fa(`/sidecar/forward-auth?configKey=${KEY}`, ['x-user-reference', 'nina-secret-ref']);
    await fa(`/sidecar/forward-auth?configKey=${KEY}`, ['x-user-reference', 'otto-secret-ref']);
    await fa(`/sidecar/forward-auth?configKey=${KEY}`, ['x-user-reference', 'pia-secret-ref']);
    await fa('/sidecar/forward-auth', ['x-user-reference', 'nina-secret-ref']); // 400: not logged
    await s.check({ userReference: 'nina-secret-ref', configKey: KEY }); // the check's line has no route
    await pool!.close();
    pool = undefined;
    await s.close();
    const text = readFileSync(file, 'utf8');
    // Computed here with node:crypto, independently of src/decision/decision-log.ts.
    const hashOf = (ref: string): string => createHmac('sha256', hashKey).update(ref).digest('hex').slice(0, 32);
    const lines = text.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    for (const l of lines) expect(l.decisionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(lines.map(({ time: _t, decisionId: _d, ...rest }) => rest)).toEqual([
      { event: 'decision', configKey: KEY, decision: 'allow', source: 'upstream', status: 200, route: 'forward_auth', userRefHash: hashOf('nina-secret-ref') },
      { event: 'decision', configKey: KEY, decision: 'deny', source: 'upstream', status: 200, cause: 'evaluated', route: 'forward_auth', userRefHash: hashOf('otto-secret-ref') },
      { event: 'decision', configKey: KEY, decision: 'deny', source: 'fail-closed', status: 503, cause: 'upstream_5xx', route: 'forward_auth', userRefHash: hashOf('pia-secret-ref') },
      { event: 'decision', configKey: KEY, decision: 'allow', source: 'cache', status: 200, userRefHash: hashOf('nina-secret-ref') },
    ]);
    expect(text).not.toContain('secret-ref');
  });

  it('an exception while answering becomes a 503 internal_error (or the last resort), never an unhandled rejection', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    const original = DecisionMetrics.prototype.answered;
    const spy = vi.spyOn(DecisionMetrics.prototype, 'answered').mockImplementation(function (this: DecisionMetrics, a, route) {
      if (a.decision === 'allow') throw new Error('metrics exploded');
      return original.call(this, a, route);
    });
    try {
      const { u } = await start();
      u.reply({ body: allow(KEY, Date.now() + 60_000) });
      const r = await fa(`/sidecar/forward-auth?configKey=${KEY}`, ['x-user-reference', 'quinn']);
      expect(r.status).toBe(503);
      expect(r.headers['x-consent-decision-error']).toBe('internal_error');
      // From the cache, synchronously: the same.
      const hit = await fa(`/sidecar/forward-auth?configKey=${KEY}`, ['x-user-reference', 'quinn']);
      expect(hit.status).toBe(503);
      // Even answering the failure fails: the last-resort 503.
      spy.mockImplementation(() => {
        throw new Error('metrics exploded again');
      });
      for (const user of ['quinn', 'rita']) {
        const last = await fa(`/sidecar/forward-auth?configKey=${KEY}`, ['x-user-reference', user]);
        expect(last.status).toBe(503);
        expect(last.headers['x-consent-decision-error']).toBe('internal_error');
        expect(last.headers['x-consent-decision-source']).toBe('fail-closed');
      }
      // An unhandled rejection would come from a request handler that has not finished yet: close the
      // sidecar (every handler done, every connection gone), let the loop turn once, then look.
      await pool!.close();
      pool = undefined;
      await sidecar!.close();
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).toEqual([]);
    } finally {
      spy.mockRestore();
      process.off('unhandledRejection', onUnhandled);
    }
  });
});

describe('forward-auth reads header values as UTF-8 (issue 20)', () => {
  /** A header value as node and undici write it: the UTF-8 bytes of `text`, one latin1 character per byte. */
  const utf8OnTheWire = (text: string): string => Buffer.from(text, 'utf8').toString('latin1');
  const SECRET = 'whsec_forward_auth_utf8_0123456789';

  it('ålice in the user header is the ålice of the check route and of a revocation naming her', async () => {
    app = await startApp();
    const { u, s } = await start({ 'webhook-listen': '127.0.0.1:0', 'app-webhook-url': app.url, 'webhook-secret': SECRET });
    u.reply({ body: allow(KEY, Date.now() + 60_000) });
    // The check route caches ålice's ALLOW (its JSON body is UTF-8).
    expect((await s.check({ userReference: 'ålice', configKey: KEY })).source).toBe('upstream');
    // Forward-auth names her in a header: the same customer, so the same cache entry.
    const hit = await fa(`/sidecar/forward-auth?configKey=${KEY}`, ['x-user-reference', utf8OnTheWire('ålice')]);
    expect([hit.status, hit.headers['x-consent-decision-source']]).toEqual([200, 'cache']);
    expect(asked(u)).toEqual([{ userReference: 'ålice', configKey: KEY }]);

    // A signed revocation naming ålice purges what forward-auth would serve.
    const body = Buffer.from(JSON.stringify({ id: 'evt_alice_revoked', sequence: 1, type: 'redec.notification.required', occurredAt: Date.now(), data: { notification_reason: 'revoke', customer_tenant_id: 'ålice' } }));
    const ts = Math.floor(Date.now() / 1000);
    const signature = `v1=${createHmac('sha256', SECRET).update(`${ts}.`).update(body).digest('hex')}`;
    const delivered = await fetch(`${s.handle.urls.webhook}/webhooks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-service-event-id': 'evt_alice_revoked', 'x-service-delivery-id': 'dlv_1', 'x-service-timestamp': String(ts), 'x-service-signature': signature },
      body,
    });
    expect(delivered.status).toBe(200);
    u.reply({ body: deny(KEY) });
    const after = await fa(`/sidecar/forward-auth?configKey=${KEY}`, ['x-user-reference', utf8OnTheWire('ålice')]);
    expect([after.status, after.headers['x-consent-decision-source']]).toEqual([403, 'upstream']);
    expect(asked(u)).toEqual([
      { userReference: 'ålice', configKey: KEY },
      { userReference: 'ålice', configKey: KEY },
    ]);
  });

  it('the configKey header is UTF-8 too', async () => {
    const { u } = await start();
    u.reply({ body: deny('flöw') });
    const r = await fa('/sidecar/forward-auth', ['x-user-reference', utf8OnTheWire('bjørn'), 'x-consent-config-key', utf8OnTheWire('flöw')]);
    expect(r.status).toBe(403);
    expect(asked(u)).toEqual([{ userReference: 'bjørn', configKey: 'flöw' }]);
  });

  it.each([
    ['a lone continuation byte', '\x80lice'],
    ['a truncated sequence', 'al\xc3'],
    ['an overlong encoding', '\xc0\xafadmin'],
    ['a latin1 å (not UTF-8)', '\xe5lice'],
  ])('%s is not UTF-8: 400, the service is not called', async (_name, raw) => {
    const { u } = await start();
    const r = await fa(`/sidecar/forward-auth?configKey=${KEY}`, ['x-user-reference', raw]);
    expect(r.status).toBe(400);
    expect(r.headers['x-consent-decision-error']).toBe('invalid_request');
    expect(r.text).toMatch(/UTF-8/);
    expect(u.count).toBe(0);
  });
});
