// The baseline for a cache hit and for the footprint: the cheapest node:http server, answering a
// fixed JSON body of the same size as the sidecar's after reading the request's, as the sidecar
// must. CommonJS with node:http required: an ES module would load the ESM loader (about 2.5 MiB)
// and an ESM import of node:http its lazy exports (some 11 MiB, src/lib/node-http.ts), a heavier
// baseline that would flatter the footprint's ratios.
//   node bare-required.cjs <port> [body]
const { createServer } = require('node:http');

const port = Number(process.argv[2]);
const body = process.argv[3] ?? '{"decision":"ALLOW","configKey":"marketing-email","validUntil":4102444800000}';
// The sidecar's headers, byte for byte in length: its decision id is a fresh UUID per answer, here a
// fixed one (the baseline writes the same bytes; making the id is the sidecar's own cost).
const headers = ['content-type', 'application/json', 'content-length', String(Buffer.byteLength(body)), 'cache-control', 'no-store', 'x-consent-decision-source', 'cache', 'x-consent-decision-id', '00000000-0000-4000-8000-000000000000'];
createServer((req, res) => {
  if (req.url === '/ready') return res.end('ok');
  req.on('data', () => undefined);
  req.on('end', () => {
    res.writeHead(200, headers);
    res.end(body);
  });
}).listen(port, '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
