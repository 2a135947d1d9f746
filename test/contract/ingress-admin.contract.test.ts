import { connect, type Socket } from 'node:net';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reasonLabel, WEBHOOK_AUTH_ERROR_CODES } from '../../src/webhooks/errors.js';
import { checkClaimsAfterAll, Contract } from '../helpers/openapi-contract.js';
import { parsedJson, startTestSidecar, type AppResponse, type TestSidecar } from '../helpers/sidecar.js';
import { startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { until } from '../helpers/wait.js';
import { envelope, sign, startApp, type FakeApp } from '../helpers/webhooks.js';
import { CLAIMS } from './claims.js';

// The webhook and admin listeners' real answers, and what the app really receives (a verified
// event, a REDEC hand-over), each held to openapi/consent-sidecar.yaml.

const SECRET = 'whsec_contract_secret_0123456789';
const PORTAL = ['x-portal-key', 'portal-value'] as const;
/** The pod's app signing secret: every forward is signed with it (the two headers the document describes). */
const APP_SIGNING = 'contract-app-signing-secret-0123456789';
/** Whether a request the app got is signed by the sidecar under APP_SIGNING (computed with node:crypto). */
const signedForward = (r: { headers: Record<string, string | string[] | undefined>; body: Buffer }): boolean =>
  typeof r.headers['x-consent-sidecar-timestamp'] === 'string' && r.headers['x-consent-sidecar-signature'] === sign(APP_SIGNING, r.headers['x-consent-sidecar-timestamp'], r.body);

let up: ScriptedUpstream;
let app: FakeApp;
let sidecar: TestSidecar;
let hooks: string;
let contract: Contract;
checkClaimsAfterAll(() => contract, CLAIMS['ingress-admin.contract.test.ts']);

beforeAll(async () => {
  up = await startUpstream();
  // The REDEC listing: one pending obligation, handed to the app at the first run (no grace).
  up.reply((req) =>
    req.url.startsWith('/v1/redec/notification-requirements')
      ? { body: { items: [{ id: 'nr_contract_1', redecConsentId: 'rc_1', status: 'pending' }], nextCursor: null } }
      : { body: { decision: 'DENY', configKey: 'k' } },
  );
  app = await startApp();
  contract = await Contract.load();
  sidecar = await startTestSidecar(up.url, {
    'webhook-listen': '127.0.0.1:0',
    'app-webhook-url': app.url,
    'app-webhook-ignore': 'contract.ignored.*',
    'webhook-secret': SECRET,
    'webhook-required-header': `${PORTAL[0]}: ${PORTAL[1]}`,
    'webhook-max-body-bytes': '2048',
    'webhook-max-unverified-bytes': '2048',
    // The holder below stops sending: the minimum data rate would cut it before the second comes.
    'webhook-min-body-rate-bytes': '0',
    'webhook-forward-timeout-ms': '5000',
    'redec-reconcile-interval-ms': '600000',
    'redec-reconcile-grace-ms': '0',
    'app-signing-secret': APP_SIGNING,
  });
  hooks = sidecar.handle.urls.webhook!;
});
afterAll(async () => {
  await sidecar?.close();
  await Promise.allSettled([up?.close(), app?.close()]);
});

type Headers = [string, string][];
const now = (): number => Math.floor(Date.now() / 1000);
function signed(body: Buffer, ts: number | string = now()): Headers {
  return [['content-type', 'application/json'], ['x-service-timestamp', String(ts)], ['x-service-signature', sign(SECRET, ts, body)], ['x-service-delivery-id', 'dlv_1'], [...PORTAL]];
}

async function deliver(body: Buffer, headers: Headers, method = 'POST', path = '/webhooks', base = hooks): Promise<AppResponse> {
  const res = await request(`${base}${path}`, { method: method as 'POST', headers: headers.flat(), body: method === 'POST' ? body : null });
  const text = await res.body.text();
  const json = parsedJson(text);
  const out = { status: res.statusCode, headers: res.headers, text, json, source: undefined };
  contract.answer(method, path, out, path === '/webhooks' ? undefined : '/{anyOtherPath}');
  return out;
}

describe('webhook and admin listeners, and what the app receives ⇄ openapi/consent-sidecar.yaml', () => {
  it('a verified event: 200 accepted, the app gets the documented headers and envelope; a copy is 200 duplicate', async () => {
    const body = envelope({ id: 'evt_contract_1' });
    expect((await deliver(body, signed(body))).json).toEqual({ status: 'accepted' });
    expect((await deliver(body, signed(body))).json).toEqual({ status: 'duplicate' });
    // A type the app declared it does not want: acknowledged, never forwarded.
    const ignored = envelope({ id: 'evt_contract_ignored', type: 'contract.ignored.kind' });
    expect((await deliver(ignored, signed(ignored))).json).toEqual({ status: 'ignored' });
    // An id that is not visible ASCII reaches the app percent-encoded, and says so.
    const unicode = envelope({ id: 'évt 2', sequence: 0 });
    expect((await deliver(unicode, signed(unicode))).status).toBe(200);
    // The reconciler's hand-over may come in between: it is judged in its own test.
    const got = app.received.filter((r) => r.headers['x-consent-sidecar-reconciled'] === undefined).map((r) => ({ headers: r.headers, text: r.body.toString('utf8') }));
    expect(got).toHaveLength(2);
    for (const r of got) contract.appReceived('verifiedEvent', r);
    expect(app.received.filter((r) => r.headers['x-consent-sidecar-reconciled'] === undefined).map(signedForward)).toEqual([true, true]);
    expect(got[1]!.headers['x-consent-sidecar-event-id-encoding']).toBe('percent');
    expect(got[1]!.headers['x-consent-sidecar-out-of-order']).toBe('1');
  });

  it('401 for every authentication failure, 400 for a signed non-envelope, 413 past the limit', async () => {
    const body = envelope({ id: 'evt_contract_401' });
    const ts = now();
    const without = (name: string): Headers => signed(body, ts).filter(([n]) => n !== name);
    const replaced = (name: string, value: string): Headers => [...without(name), [name, value]];
    const cases: Record<string, Headers> = {
      required_header_missing: without(PORTAL[0]),
      required_header_mismatch: replaced(PORTAL[0], 'wrong'),
      header_repeated: [...signed(body, ts), ['x-service-timestamp', String(ts)]],
      timestamp_missing: without('x-service-timestamp'),
      signature_missing: without('x-service-signature'),
      signature_scheme: replaced('x-service-signature', 'v2=00'),
      timestamp_invalid: replaced('x-service-timestamp', 'soon'),
      timestamp_too_old: signed(body, ts - 3600),
      timestamp_too_new: signed(body, ts + 3600),
      signature_mismatch: replaced('x-service-signature', sign('whsec_another_secret_000000', ts, body)),
    };
    expect(Object.keys(cases).sort()).toEqual(WEBHOOK_AUTH_ERROR_CODES.map(reasonLabel).sort());
    for (const [reason, headers] of Object.entries(cases)) {
      const res = await deliver(body, headers);
      expect([res.status, res.json?.error], reason).toEqual([401, reason]);
    }
    const notEnvelope = Buffer.from('{"id":"evt_contract_400"}');
    expect((await deliver(notEnvelope, signed(notEnvelope))).json).toEqual({ error: 'invalid_envelope' });
    const big = envelope({ id: 'evt_contract_413', data: { pad: 'x'.repeat(3000) } });
    expect((await deliver(big, signed(big))).status).toBe(413);
  });

  it('503 when the app refuses, and when the unverified budget is spent; 405 and 404', async () => {
    app.behaviour = { status: 500 };
    const refused = envelope({ id: 'evt_contract_503' });
    expect((await deliver(refused, signed(refused))).json).toEqual({ error: 'app_unavailable' });
    app.behaviour = { status: 204 };

    // A replica with no route for a type and no default: not acknowledged (another replica may route it).
    const narrow = await startTestSidecar(up.url, { 'webhook-listen': '127.0.0.1:0', 'app-webhook-route': `contract.routed.*=${app.url}`, 'webhook-secret': SECRET, 'redec-reconcile-interval-ms': '0' });
    try {
      const unrouted = envelope({ id: 'evt_contract_unrouted', type: 'contract.other' });
      const headers = signed(unrouted).filter(([n]) => n !== PORTAL[0]);
      expect((await deliver(unrouted, headers, 'POST', '/webhooks', narrow.handle.urls.webhook!)).json).toEqual({ error: 'unrouted' });
    } finally {
      await narrow.close();
    }

    // One delivery holds 600 bytes it sent (a declared length holds nothing) while the rest does not
    // come; a second of 1,600 bytes cannot fit beside it, and, being the larger, cannot take its place.
    const holder = await holdBudget(1500, 600);
    await until(async () => (await sidecar.metric('consent_sidecar_webhook_unverified_bytes')) >= 600, 'the first delivery holds its bytes');
    const second = envelope({ id: 'evt_contract_budget', data: { pad: 'y'.repeat(1500) } });
    expect((await deliver(second, signed(second))).json).toEqual({ error: 'unverified_budget_exhausted' });
    holder.destroy();

    expect((await deliver(Buffer.alloc(0), signed(Buffer.alloc(0)), 'GET')).status).toBe(405);
    expect((await deliver(Buffer.alloc(0), [], 'GET', '/elsewhere')).status).toBe(404);
  });

  it('the REDEC hand-over as the app receives it', async () => {
    await until(() => app.received.some((r) => r.headers['x-consent-sidecar-reconciled'] === '1'), 'the reconciler handed the obligation to the app');
    const handed = app.received.find((r) => r.headers['x-consent-sidecar-reconciled'] === '1')!;
    contract.appReceived('redecNotificationPending', { headers: handed.headers, text: handed.body.toString('utf8') });
    expect(signedForward(handed)).toBe(true);
    expect(Object.keys(handed.headers).filter((h) => h.startsWith('x-service-') || h === 'x-consent-sidecar-verified')).toEqual([]);
  });

  it('admin: metrics, healthz, readyz ready and not ready, 404', async () => {
    for (const path of ['/metrics', '/healthz', '/readyz', '/nothing']) {
      contract.answer('GET', path, await sidecar.admin(path));
    }
    sidecar.handle.readiness.require('contract-test');
    const notReady = await sidecar.admin('/readyz');
    sidecar.handle.readiness.satisfy('contract-test');
    contract.answer('GET', '/readyz', notReady);
    expect(notReady.json).toEqual({ status: 'not_ready', reasons: ['waiting for contract-test'] });
  });

  it('claims only entries the document has (each is checked as exercised once every test of this file has run)', () => {
    expect(CLAIMS['ingress-admin.contract.test.ts'].length).toBeGreaterThan(0);
    expect(CLAIMS['ingress-admin.contract.test.ts'].filter((e) => !contract.entries().includes(e))).toEqual([]);
  });
});

/** A delivery whose headers pass and whose body never comes: it holds `declared` bytes of the unverified budget. */
async function holdBudget(declared: number, sent: number): Promise<Socket> {
  const { hostname, port } = new URL(hooks);
  const socket = connect(Number(port), hostname);
  socket.on('error', () => undefined);
  await new Promise((r) => socket.once('connect', r));
  const ts = now();
  const head = signed(Buffer.from('never sent'), ts)
    .filter(([n]) => n !== 'content-type')
    .map(([n, v]) => `${n}: ${v}\r\n`)
    .join('');
  socket.write(`POST /webhooks HTTP/1.1\r\nhost: ${hostname}\r\ncontent-type: application/json\r\ncontent-length: ${declared}\r\n${head}\r\n{${'x'.repeat(sent - 1)}`);
  return socket;
}
