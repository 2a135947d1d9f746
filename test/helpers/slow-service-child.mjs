// A consent service in a process of its own (test/helpers/slow-service.ts starts it): every check is
// answered ALLOW for the configKey asked, valid ten minutes, `delayMs` after its body arrived. It
// records the userReference of every check it received, the moment its body was read, and hands them
// out on `GET /stats` so a test can tell a timeout of a request the service really received from one
// that never reached it. Prints `{"port":N}` on stdout once it listens.
import { createServer } from 'node:http';

const delayMs = Number(process.argv[2] ?? 300);
const received = [];
let answered = 0;

const server = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    if (req.method === 'GET' && req.url === '/stats') {
      const text = JSON.stringify({ received, answered });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
      return;
    }
    if (req.method !== 'POST' || req.url !== '/v1/authorization/check') {
      res.writeHead(404).end();
      return;
    }
    const { userReference, configKey } = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    received.push(userReference);
    const text = JSON.stringify({ decision: 'ALLOW', configKey, validUntil: Date.now() + 600_000 });
    setTimeout(() => {
      answered++;
      if (!res.destroyed) res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
    }, delayMs);
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`));
process.on('SIGTERM', () => process.exit(0));
