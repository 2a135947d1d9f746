// The bench's small servers, each run in a process of its own (plain JS: nothing to compile).
//   upstream <port> <validUntil> [delayMs]  the consent service: ALLOW for the configKey asked, after
//                                           delayMs (default 0); an empty, last REDEC listing page for a GET
//   forwarder <port> <upstreamUrl> <apiKey> the miss path's baseline: node:http + an undici Pool
//   hmac <port> <secret>                    the webhooks' baseline: reads the body, checks the HMAC
//   hmac-forward <port> <secret> <appUrl>   the same, then POSTs the body to the app (undici Pool)
//                                           and answers 200 once the app said 2xx: the least any
//                                           ingress that forwards before it acknowledges must do
//   app <port>                              the application behind the sidecar: 204 to everything
//   upstream-ttl <port> <lifeMs>            the consent service answering ALLOW valid `lifeMs` from
//                                           now; GET /calls says how many checks it answered; after
//                                           POST /deny, DENY (GET /first-deny: when it first said so)
// Each prints `ready <port>` once listening, and exits on SIGTERM.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';
import { Pool } from 'undici';

const [role, portText, a, b] = process.argv.slice(2);
const port = Number(portText);
const readBody = (req, done) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => done(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)));
};

let handler;
if (role === 'upstream') {
  const validUntil = Number(a);
  const delayMs = Number(b ?? 0);
  handler = (req, res) =>
    readBody(req, (body) => {
      // Anything but a check (the REDEC reconciler's listing) gets an empty page.
      if (req.method !== 'POST') return res.writeHead(200, { 'content-type': 'application/json' }).end('{"items":[],"nextCursor":null}');
      const { configKey } = JSON.parse(body.toString('utf8'));
      const text = JSON.stringify({ decision: 'ALLOW', configKey, validUntil });
      const answer = () => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
        res.end(text);
      };
      if (delayMs > 0) setTimeout(answer, delayMs);
      else answer();
    });
} else if (role === 'forwarder') {
  const upstream = new URL(a);
  const pool = new Pool(upstream.origin, { connections: 64, pipelining: 1 });
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${b}` };
  handler = (req, res) =>
    readBody(req, async (body) => {
      try {
        const r = await pool.request({ method: 'POST', path: upstream.pathname, headers, body });
        const text = await r.body.text();
        res.writeHead(r.statusCode, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
        res.end(text);
      } catch {
        res.writeHead(503).end();
      }
    });
} else if (role === 'hmac') {
  const secret = a;
  handler = (req, res) =>
    readBody(req, (body) => {
      const ts = String(req.headers['x-service-timestamp']);
      const given = Buffer.from(String(req.headers['x-service-signature']).slice(3));
      const expected = Buffer.from(createHmac('sha256', secret).update(`${ts}.`).update(body).digest('hex'));
      const ok = given.length === expected.length && timingSafeEqual(given, expected);
      res.writeHead(ok ? 200 : 401, { 'content-type': 'application/json' }).end('{"status":"accepted"}');
    });
} else if (role === 'hmac-forward') {
  const secret = a;
  const app = new URL(b);
  const pool = new Pool(app.origin, { connections: 128, pipelining: 1 });
  handler = (req, res) =>
    readBody(req, async (body) => {
      const ts = String(req.headers['x-service-timestamp']);
      const given = Buffer.from(String(req.headers['x-service-signature']).slice(3));
      const expected = Buffer.from(createHmac('sha256', secret).update(`${ts}.`).update(body).digest('hex'));
      if (!(given.length === expected.length && timingSafeEqual(given, expected))) return res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"signature_mismatch"}');
      try {
        const r = await pool.request({ method: 'POST', path: app.pathname, headers: { 'content-type': 'application/json', 'x-service-event-id': String(req.headers['x-service-event-id']) }, body });
        await r.body.dump();
        const ok = r.statusCode >= 200 && r.statusCode < 300;
        res.writeHead(ok ? 200 : 503, { 'content-type': 'application/json' }).end(ok ? '{"status":"accepted"}' : '{"error":"app_unavailable"}');
      } catch {
        res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"app_unavailable"}');
      }
    });
} else if (role === 'upstream-ttl') {
  const lifeMs = Number(a);
  let calls = 0;
  // POST /deny: from then on every check is an evaluated DENY; GET /first-deny says when the first
  // one was written (epoch ms, fractional: performance.timeOrigin + now, comparable across processes).
  let deny = false;
  let firstDenyAt = null;
  handler = (req, res) =>
    readBody(req, (body) => {
      if (req.method !== 'POST' || req.url === '/deny') {
        if (req.url === '/deny') deny = true;
        const text = req.url === '/calls' ? String(calls) : req.url === '/first-deny' ? JSON.stringify(firstDenyAt) : '{"items":[],"nextCursor":null}';
        return res.writeHead(200, { 'content-type': 'application/json' }).end(text);
      }
      calls++;
      const { configKey } = JSON.parse(body.toString('utf8'));
      if (deny) {
        const text = JSON.stringify({ decision: 'DENY', configKey });
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
        firstDenyAt ??= performance.timeOrigin + performance.now();
        return res.end(text);
      }
      const text = JSON.stringify({ decision: 'ALLOW', configKey, validUntil: Date.now() + lifeMs });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    });
} else if (role === 'app') {
  handler = (req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(204).end());
  };
} else {
  throw new Error(`unknown role ${role}`);
}
const server = createServer((req, res) => (req.url === '/ready' ? res.end('ok') : handler(req, res)));
server.keepAliveTimeout = 60_000;
server.listen(port, '127.0.0.1', () => process.stdout.write(`ready ${server.address().port}\n`));
process.on('SIGTERM', () => process.exit(0));
