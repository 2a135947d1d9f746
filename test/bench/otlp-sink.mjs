// An OTLP/HTTP trace sink for `npm run bench` (the tracing section), in a process of its own:
// answers every export 200 and counts the spans it was sent (GET /count), as a collector would.
import { createServer } from 'node:http';

const port = Number(process.argv[2]);
let spans = 0;
createServer((req, res) => {
  if (req.method === 'GET') {
    res.end(req.url === '/count' ? String(spans) : 'ok');
    return;
  }
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    // One "spanId" per span in OTLP's JSON encoding.
    spans += body.split('"spanId"').length - 1;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{}');
  });
}).listen(port, '127.0.0.1');
