import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request a test receiver got, with its raw body. */
export interface Received {
  readonly at: number;
  readonly headers: IncomingHttpHeaders;
  readonly raw: string;
}

/** A webhook receiver on port 0 that answers `status()` and records every request. */
export interface Receiver {
  readonly url: string;
  readonly received: Received[];
  status: () => number;
  close(): Promise<void>;
}

export async function startReceiver(status: () => number = () => 200): Promise<Receiver> {
  const received: Received[] = [];
  const receiver: { status: () => number } = { status };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ at: Date.now(), headers: req.headers, raw: Buffer.concat(chunks).toString('utf8') });
      res.statusCode = receiver.status();
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    received,
    get status() {
      return receiver.status;
    },
    set status(fn) {
      receiver.status = fn;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** POSTs a check to `baseUrl` with the given key. */
export async function check(
  baseUrl: string,
  apiKey: string,
  body: unknown,
): Promise<{ status: number; body: Record<string, unknown>; headers: Headers; text: string }> {
  const res = await fetch(`${baseUrl}/v1/authorization/check`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: Record<string, unknown> = {};
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // malformed on purpose in fault tests; callers assert on `text`
  }
  return { status: res.status, body: parsed, headers: res.headers, text };
}

/** Waits until `predicate` holds, polling every 5 ms, or fails after `timeoutMs`. */
export async function until(predicate: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}
