import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseYamlStream, render, vendoredExampleChart, type K8sObject } from '../helpers/helm.js';
import { startCaddy } from '../helpers/caddy.js';
import { docText } from '../helpers/docs.js';
import { freePort, startNginx } from '../helpers/nginx.js';
import { startTestSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { allow, CHECK_PATH, deny, startUpstream, type ReceivedRequest, type ScriptedUpstream } from '../helpers/upstream.js';

// The forward-auth recipes of examples/forward-auth, each file as shipped: nginx and Caddy run for real
// (Debian's nginx-light and caddy) in front of a real app, asking the real sidecar, which asks a
// scripted consent service; Traefik's is checked against its dynamic configuration's fields and the
// request its ForwardAuth makes is sent to the sidecar. The only edits are the addresses the files
// mark as yours, each found exactly where expected.

const RECIPES = new URL('../../examples/forward-auth/', import.meta.url);
const recipe = (name: string): string => readFileSync(new URL(name, RECIPES), 'utf8');
const KEY = 'marketing-email';

/** Replaces `from` by `to`, which must occur exactly `times` times (the test fails if a recipe moved). */
function swap(text: string, from: string, to: string, times = 1): string {
  const found = text.split(from).length - 1;
  if (found !== times) throw new Error(`expected "${from}" ${times} time(s) in the recipe, found ${found}`);
  return text.replaceAll(from, to);
}

interface AppHit {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
}

/** The service: ALLOW for alice, DENY for everyone else. */
const decide = (r: ReceivedRequest) => {
  const { userReference, configKey } = JSON.parse(r.body) as { userReference: string; configKey: string };
  return { body: userReference === 'alice' ? allow(configKey, Date.now() + 60_000) : deny(configKey) };
};

let upstream: ScriptedUpstream;
let sidecar: TestSidecar;
let app: Server;
let appPort: number;
const appHits: AppHit[] = [];
const asked = (): { userReference: string; configKey: string }[] =>
  upstream.requests.filter((r) => r.url === CHECK_PATH).map((r) => JSON.parse(r.body) as { userReference: string; configKey: string });

beforeAll(async () => {
  upstream = await startUpstream(decide);
  sidecar = await startTestSidecar(upstream.url);
  app = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      appHits.push({ method: req.method!, url: req.url!, headers: req.headers });
      res.writeHead(200, { 'content-type': 'text/plain' }).end('hello from the app');
    });
  });
  await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
  appPort = (app.address() as AddressInfo).port;
}, 30_000);

afterAll(async () => {
  await sidecar?.close();
  await upstream?.close();
  await new Promise((r) => app?.close(r));
});

/** The proxies that run here, each from its shipped file with the addresses swapped. */
const PROXIES: [string, () => Promise<{ url: string; close: () => Promise<void> }>][] = [
  [
    'nginx (examples/forward-auth/nginx.conf)',
    async () => {
      const port = await freePort();
      let conf = recipe('nginx.conf');
      conf = swap(conf, 'server 127.0.0.1:7700;', `server ${sidecar.handle.urls.decision.replace('http://', '')};`);
      conf = swap(conf, 'listen 8081;', `listen 127.0.0.1:${port};`);
      conf = swap(conf, 'http://127.0.0.1:8080;', `http://127.0.0.1:${appPort};`);
      return startNginx(conf, port);
    },
  ],
  [
    'Caddy (examples/forward-auth/Caddyfile)',
    async () => {
      const port = await freePort();
      let conf = recipe('Caddyfile');
      conf = swap(conf, 'forward_auth 127.0.0.1:7700 {', `forward_auth ${sidecar.handle.urls.decision.replace('http://', '')} {`);
      conf = swap(conf, '\n:8081 {', `\nhttp://127.0.0.1:${port} {`);
      conf = swap(conf, 'reverse_proxy 127.0.0.1:8080', `reverse_proxy 127.0.0.1:${appPort}`);
      return startCaddy(conf, port);
    },
  ],
];

describe.each(PROXIES)('%s in front of a real app', (_name, start) => {
  let proxy: { url: string; close: () => Promise<void> };
  beforeAll(async () => {
    proxy = await start();
  }, 30_000);
  afterAll(async () => {
    await proxy?.close();
  });
  beforeEach(async () => {
    appHits.length = 0;
    upstream.resetLog();
    upstream.reply(decide);
    await sidecar.send('DELETE', '/sidecar/cache');
  });

  const get = async (path: string, headers: Record<string, string> = {}): Promise<number> => {
    const res = await request(`${proxy.url}${path}`, { headers });
    await res.body.dump();
    return res.statusCode;
  };

  it('an allowed user reaches the app, which sees the checked user reference and the sidecar\'s validUntil', async () => {
    expect(await get('/orders/42?page=2', { 'x-forwarded-user': 'alice' })).toBe(200);
    expect(appHits.map((h) => h.url)).toEqual(['/orders/42?page=2']);
    expect(appHits[0]!.headers['x-user-reference']).toBe('alice');
    expect(Number(appHits[0]!.headers['x-consent-valid-until'])).toBeGreaterThan(Date.now());
    expect(asked()).toEqual([{ userReference: 'alice', configKey: KEY }]);
  });

  it('a denied user gets 403 and the app sees nothing', async () => {
    expect(await get('/orders/42', { 'x-forwarded-user': 'bob' })).toBe(403);
    expect(appHits).toEqual([]);
  });

  it('the consent service down: a 5xx, and the app sees nothing', async () => {
    upstream.reply({ status: 500 });
    expect(await get('/orders/42', { 'x-forwarded-user': 'alice' })).toBeGreaterThanOrEqual(500);
    expect(appHits).toEqual([]);
  });

  it("a client's own X-User-Reference is replaced by the authenticated identity, in the check and towards the app", async () => {
    expect(await get('/orders/42', { 'x-forwarded-user': 'bob', 'x-user-reference': 'alice' })).toBe(403);
    expect(asked()).toEqual([{ userReference: 'bob', configKey: KEY }]);
    expect(await get('/orders/42', { 'x-forwarded-user': 'alice', 'x-user-reference': 'mallory' })).toBe(200);
    expect(appHits.map((h) => h.headers['x-user-reference'])).toEqual(['alice']);
  });

  it("without an identity, a client's X-User-Reference alone gets nowhere (the service is not asked)", async () => {
    expect(await get('/orders/42', { 'x-user-reference': 'alice' })).toBeGreaterThanOrEqual(400);
    expect(appHits).toEqual([]);
    expect(upstream.count).toBe(0);
  });

  it("a client's own X-Consent-Config-Key is stripped: the configKey is the recipe's, and the app never sees one", async () => {
    expect(await get('/orders/42', { 'x-forwarded-user': 'alice', 'x-consent-config-key': 'something-else' })).toBe(200);
    expect(asked()).toEqual([{ userReference: 'alice', configKey: KEY }]);
    expect(appHits[0]!.headers['x-consent-config-key']).toBeUndefined();
  });

  it("a client's own X-Consent-Valid-Until never reaches the app: only the sidecar's answer does", async () => {
    const forged = String(Date.now() + 10 * 365 * 86_400_000);
    expect(await get('/orders/42', { 'x-forwarded-user': 'alice', 'x-consent-valid-until': forged })).toBe(200);
    expect(appHits[0]!.headers['x-consent-valid-until']).not.toBe(forged);
    expect(Number(appHits[0]!.headers['x-consent-valid-until'])).toBeLessThan(Number(forged));
  });
});

/** Traefik's dynamic configuration (file provider), the fields this recipe may use, checked as Traefik reads them. */
const ROUTER_FIELDS = ['entryPoints', 'rule', 'ruleSyntax', 'middlewares', 'service', 'priority', 'tls', 'observability'];
const MIDDLEWARE_TYPES = ['addPrefix', 'basicAuth', 'buffering', 'chain', 'circuitBreaker', 'compress', 'contentType', 'digestAuth', 'errors', 'forwardAuth', 'grpcWeb', 'headers', 'ipAllowList', 'inFlightReq', 'passTLSClientCert', 'plugin', 'rateLimit', 'redirectRegex', 'redirectScheme', 'replacePath', 'replacePathRegex', 'retry', 'stripPrefix', 'stripPrefixRegex'];
const FORWARD_AUTH_FIELDS = ['address', 'tls', 'trustForwardHeader', 'authResponseHeaders', 'authResponseHeadersRegex', 'authRequestHeaders', 'addAuthCookiesToResponse', 'headerField', 'forwardBody', 'maxBodySize', 'preserveLocationHeader', 'preserveRequestMethod'];
const HEADERS_FIELDS = ['customRequestHeaders', 'customResponseHeaders', 'accessControlAllowCredentials', 'accessControlAllowHeaders', 'accessControlAllowMethods', 'accessControlAllowOriginList', 'accessControlAllowOriginListRegex', 'accessControlExposeHeaders', 'accessControlMaxAge', 'addVaryHeader', 'allowedHosts', 'hostsProxyHeaders', 'sslProxyHeaders', 'stsSeconds', 'stsIncludeSubdomains', 'stsPreload', 'forceSTSHeader', 'frameDeny', 'customFrameOptionsValue', 'contentTypeNosniff', 'browserXssFilter', 'customBrowserXSSValue', 'contentSecurityPolicy', 'contentSecurityPolicyReportOnly', 'publicKey', 'referrerPolicy', 'permissionsPolicy', 'isDevelopment'];
const LOAD_BALANCER_FIELDS = ['servers', 'sticky', 'healthCheck', 'passHostHeader', 'responseForwarding', 'serversTransport'];

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const isStrings = (v: unknown): boolean => Array.isArray(v) && v.every((x) => typeof x === 'string');
const unknown = (o: Obj, allowed: readonly string[], at: string): string[] => Object.keys(o).filter((k) => !allowed.includes(k)).map((k) => `${at}.${k}: not a Traefik field`);

function traefikProblems(doc: unknown): string[] {
  const p: string[] = [];
  if (!isObj(doc) || !isObj(doc.http)) return ['http: expected an object'];
  p.push(...unknown(doc, ['http', 'tcp', 'udp', 'tls'], '$'));
  const http = doc.http;
  p.push(...unknown(http, ['routers', 'middlewares', 'services', 'serversTransports'], 'http'));
  const routers = isObj(http.routers) ? http.routers : {};
  const middlewares = isObj(http.middlewares) ? http.middlewares : {};
  const services = isObj(http.services) ? http.services : {};
  for (const [name, r] of Object.entries(routers)) {
    const at = `http.routers.${name}`;
    if (!isObj(r)) { p.push(`${at}: expected an object`); continue; }
    p.push(...unknown(r, ROUTER_FIELDS, at));
    if (typeof r.rule !== 'string' || r.rule === '') p.push(`${at}.rule: required`);
    if (r.entryPoints !== undefined && !isStrings(r.entryPoints)) p.push(`${at}.entryPoints: a list of names`);
    if (!isStrings(r.middlewares ?? [])) p.push(`${at}.middlewares: a list of names`);
    for (const m of (r.middlewares as string[] | undefined) ?? []) if (!(m in middlewares)) p.push(`${at}.middlewares: no middleware "${m}"`);
    if (typeof r.service !== 'string' || !(r.service in services)) p.push(`${at}.service: no service "${String(r.service)}"`);
  }
  for (const [name, m] of Object.entries(middlewares)) {
    const at = `http.middlewares.${name}`;
    if (!isObj(m) || Object.keys(m).length !== 1) { p.push(`${at}: exactly one middleware type`); continue; }
    p.push(...unknown(m, MIDDLEWARE_TYPES, at));
    if (isObj(m.forwardAuth)) {
      const f = m.forwardAuth;
      p.push(...unknown(f, FORWARD_AUTH_FIELDS, `${at}.forwardAuth`));
      if (typeof f.address !== 'string' || !/^https?:\/\//.test(f.address)) p.push(`${at}.forwardAuth.address: an http(s) URL`);
      for (const k of ['authResponseHeaders', 'authRequestHeaders']) if (f[k] !== undefined && !isStrings(f[k])) p.push(`${at}.forwardAuth.${k}: a list of header names`);
      if (f.trustForwardHeader !== undefined && typeof f.trustForwardHeader !== 'boolean') p.push(`${at}.forwardAuth.trustForwardHeader: a boolean`);
    }
    if (isObj(m.headers)) {
      p.push(...unknown(m.headers, HEADERS_FIELDS, `${at}.headers`));
      const c = m.headers.customRequestHeaders;
      if (c !== undefined && !(isObj(c) && Object.values(c).every((v) => typeof v === 'string'))) p.push(`${at}.headers.customRequestHeaders: a map of strings`);
    }
  }
  for (const [name, s] of Object.entries(services)) {
    const at = `http.services.${name}`;
    if (!isObj(s) || !isObj(s.loadBalancer)) { p.push(`${at}.loadBalancer: required here`); continue; }
    p.push(...unknown(s, ['loadBalancer', 'weighted', 'mirroring', 'failover'], at));
    p.push(...unknown(s.loadBalancer, LOAD_BALANCER_FIELDS, `${at}.loadBalancer`));
    const servers = s.loadBalancer.servers;
    if (!Array.isArray(servers) || servers.length === 0 || !servers.every((x) => isObj(x) && typeof x.url === 'string')) p.push(`${at}.loadBalancer.servers: a list of {url}`);
  }
  return p;
}

describe("Traefik's ForwardAuth (examples/forward-auth/traefik.yaml)", () => {
  let doc: { http: { routers: Record<string, { middlewares: string[] }>; middlewares: Record<string, Obj> } };
  let traefikSidecar: TestSidecar;
  beforeAll(async () => {
    doc = (await parseYamlStream(recipe('traefik.yaml')))[0] as typeof doc;
    // As the recipe says: the sidecar reads the identity from X-Forwarded-User.
    traefikSidecar = await startTestSidecar(upstream.url, { 'forward-auth-user-header': 'X-Forwarded-User' });
  });
  afterAll(async () => {
    await traefikSidecar?.close();
  });

  it('is a valid dynamic configuration: only Traefik fields, every reference defined', () => {
    expect(traefikProblems(doc)).toEqual([]);
    // The checker can fail.
    expect(traefikProblems({ http: { routers: { a: { rule: 'x', service: 'nope', middlewares: ['gone'] } }, middlewares: { m: { forwardAuth: { adress: 'x' } } } } })).toEqual([
      'http.routers.a.middlewares: no middleware "gone"',
      'http.routers.a.service: no service "nope"',
      'http.middlewares.m.forwardAuth.adress: not a Traefik field',
      'http.middlewares.m.forwardAuth.address: an http(s) URL',
    ]);
  });

  it("strips the client's copies first, then asks the sidecar with the identity alone, and copies the sidecar's validUntil", () => {
    expect(doc.http.routers.app!.middlewares).toEqual(['consent-strip-client-headers', 'consent-forward-auth']);
    const strip = (doc.http.middlewares['consent-strip-client-headers'] as { headers: { customRequestHeaders: Record<string, string> } }).headers.customRequestHeaders;
    expect(strip).toEqual({ 'X-User-Reference': '', 'X-Consent-Config-Key': '', 'X-Consent-Valid-Until': '' });
    const fa = (doc.http.middlewares['consent-forward-auth'] as { forwardAuth: Obj }).forwardAuth;
    expect(fa).toMatchObject({ authRequestHeaders: ['X-Forwarded-User'], authResponseHeaders: ['X-Consent-Valid-Until'], trustForwardHeader: false });
  });

  it("the request Traefik's ForwardAuth makes (GET the address, the identity and its X-Forwarded-* headers) gets the sidecar's answer", async () => {
    const fa = (doc.http.middlewares['consent-forward-auth'] as { forwardAuth: { address: string } }).forwardAuth;
    const address = swap(fa.address, 'http://127.0.0.1:7700', traefikSidecar.handle.urls.decision);
    const ask = async (user: string) => {
      const res = await request(address, {
        headers: { 'x-forwarded-user': user, 'x-forwarded-method': 'GET', 'x-forwarded-proto': 'http', 'x-forwarded-host': 'shop.example.com', 'x-forwarded-uri': '/orders/42', 'x-forwarded-for': '203.0.113.9' },
      });
      await res.body.dump();
      return { status: res.statusCode, validUntil: res.headers['x-consent-valid-until'] };
    };
    upstream.resetLog();
    expect(await ask('alice')).toMatchObject({ status: 200, validUntil: expect.stringMatching(/^\d+$/) });
    expect((await ask('bob')).status).toBe(403);
    expect(asked()).toEqual([
      { userReference: 'alice', configKey: KEY },
      { userReference: 'bob', configKey: KEY },
    ]);
  });
});

describe('the recipes are what the docs and the example chart show', () => {
  it('docs/decision-api.md shows each recipe file verbatim', () => {
    const page = docText('decision-api.md');
    expect(page).toContain(`\`\`\`nginx\n${recipe('nginx.conf')}\`\`\``);
    expect(page).toContain(`\`\`\`caddyfile\n${recipe('Caddyfile')}\`\`\``);
    expect(page).toContain(`\`\`\`yaml\n${recipe('traefik.yaml')}\`\`\``);
  });

  it("the shop example chart's nginx config, rendered with its defaults, is the plain nginx.conf (directives alike)", async () => {
    const vendored = await vendoredExampleChart();
    try {
      const objects: K8sObject[] = await render({ chart: vendored.dir, set: ['nginx.enabled=true'] });
      const cm = objects.find((o) => o.kind === 'ConfigMap') as K8sObject & { data: Record<string, string> };
      const directives = (text: string): string[] => text.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'));
      expect(directives(cm.data['default.conf']!)).toEqual(directives(recipe('nginx.conf')));
    } finally {
      await vendored.cleanup();
    }
  });
});
