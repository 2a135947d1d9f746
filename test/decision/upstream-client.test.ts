import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { staticSecret } from '../../src/config/index.js';
import { UpstreamClient } from '../../src/decision/index.js';

// One deadline queue and timer serve every call (issue 14): each call still ends at its own deadline.

let server: Server | undefined;
let client: UpstreamClient | undefined;
afterEach(async () => {
  await client?.destroy();
  server?.closeAllConnections();
  await new Promise((r) => (server ? server.close(r) : r(undefined)));
  server = client = undefined;
});

/** A service that answers bodies containing "fast" at once and never answers the others. */
async function service(): Promise<string> {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      if (body.includes('fast')) res.writeHead(200, { 'content-type': 'application/json' }).end(`{"echo":${body}}`);
    });
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('UpstreamClient deadlines', () => {
  it('every one of many concurrent calls times out, batches started later included; answered calls are not disturbed', async () => {
    const base = await service();
    client = new UpstreamClient({ baseUrl: new URL(base), apiKey: staticSecret('k', 'test'), timeoutMs: 300 }, { connections: 64 });
    const outcome = (p: Promise<unknown>) =>
      p.then(
        () => 'answered',
        (err: { code?: string }) => err.code ?? 'other',
      );
    const first = Array.from({ length: 20 }, (_, i) => outcome(client!.check(`{"slow":${i}}`)));
    const fast = Array.from({ length: 5 }, (_, i) => client!.check(`{"fast":${i}}`));
    await new Promise((r) => setTimeout(r, 100));
    const second = Array.from({ length: 20 }, (_, i) => outcome(client!.check(`{"slow":${100 + i}}`)));
    const answers = await Promise.all(fast);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
    expect(answers.map((a) => JSON.parse(a.body) as unknown)).toEqual([0, 1, 2, 3, 4].map((i) => ({ echo: { fast: i } })));
    expect(await Promise.all(first)).toEqual(Array(20).fill('ERR_UPSTREAM_TIMEOUT'));
    expect(await Promise.all(second)).toEqual(Array(20).fill('ERR_UPSTREAM_TIMEOUT'));
    // and the client still works afterwards
    expect((await client.check('{"fast":"after"}')).status).toBe(200);
  });
});
