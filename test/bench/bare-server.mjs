// The baseline: bare node:http answering a fixed JSON body of the same size as the sidecar's,
// after reading the request body (as the sidecar must).
import { createServer } from 'node:http';

const [port, body] = [Number(process.argv[2]), process.argv[3] ?? '{}'];
const headers = ['content-type', 'application/json', 'content-length', String(Buffer.byteLength(body)), 'cache-control', 'no-store', 'x-consent-decision-source', 'cache'];
createServer((req, res) => {
  if (req.url === '/ready') return res.end('ok');
  req.on('data', () => undefined);
  req.on('end', () => {
    res.writeHead(200, headers);
    res.end(body);
  });
}).listen(port, '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
