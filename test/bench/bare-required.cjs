// The footprint baseline: the cheapest node:http server (required: an ESM import of node:http
// costs some 11 MiB more, src/lib/node-http.ts), answering a check-sized JSON body after reading
// the request's, as the sidecar must.
const { createServer } = require('node:http');

const port = Number(process.argv[2]);
const body = '{"decision":"ALLOW","configKey":"marketing-email","validUntil":4102444800000}';
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
