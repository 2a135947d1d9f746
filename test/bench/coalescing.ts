import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent, request } from 'undici';
import { freePort, startChild, stopChild } from './lib.js';

const CHECK = '/v1/authorization/check';
const ALLOW_BODY = JSON.stringify({ userReference: 'alice', configKey: 'marketing-email' });

/** 1,000 concurrent identical misses against a slow upstream that counts what reaches it. */
export async function benchCoalescing(cli: string): Promise<{ requests: number; upstreamCalls: number; allows: number }> {
  let calls = 0;
  const upstream: Server = createServer((req, res) => {
    // Only checks count (the REDEC reconciler lists its obligations at start: an empty page).
    if (req.method !== 'POST') return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"items":[]}');
    calls++;
    req.resume();
    req.on('end', () =>
      setTimeout(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ decision: 'ALLOW', configKey: 'marketing-email', validUntil: Date.now() + 60_000 }));
      }, 300),
    );
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const [port, admin] = [await freePort(), await freePort()];
  const child = await startChild(
    process.execPath,
    // The start-up key check is a check call too: off, so every counted call is one of the bench's misses.
    [cli, 'serve', '--upstream-url', `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`, '--api-key', 'bench-key', '--api-key-check', 'off', '--listen', `127.0.0.1:${port}`, '--admin-listen', `127.0.0.1:${admin}`, '--log-level', 'warn'],
    `http://127.0.0.1:${admin}/readyz`,
  );
  const agent = new Agent({ connections: 1000 });
  try {
    const N = 1000;
    const answers = await Promise.all(
      Array.from({ length: N }, async () => {
        const res = await request(`http://127.0.0.1:${port}${CHECK}`, { method: 'POST', body: ALLOW_BODY, headers: { 'content-type': 'application/json' }, dispatcher: agent });
        return ((await res.body.json()) as { decision: string }).decision;
      }),
    );
    return { requests: N, upstreamCalls: calls, allows: answers.filter((d) => d === 'ALLOW').length };
  } finally {
    await agent.close();
    await stopChild(child);
    await new Promise((r) => upstream.close(r));
  }
}
