import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../../src/observability/index.js';
import { capturingLogger } from './sidecar.js';
import { PATIENCE_MS } from './wait.js';

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

/** Waits until `predicate` holds, polling every 5 ms, or fails after `timeoutMs` (a safety net). */
export async function until(predicate: () => boolean, timeoutMs = PATIENCE_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

/**
 * A simulator logger that keeps what the webhook sender planned: for each event, the real-time
 * delay (ms) of every retry it scheduled, in order, and whether the delivery went terminal. How late
 * a retry actually ran is the event loop's business on a busy machine; what was planned is exact.
 */
export function scheduleLog(): { logger: Logger; retries: (eventId: string) => number[]; outcomes: (eventId: string) => string[] } {
  const { logger, lines } = capturingLogger('info');
  const of = (eventId: string) => lines().filter((l) => l.eventId === eventId);
  return {
    logger,
    retries: (eventId) => of(eventId).filter((l) => l.msg === 'webhook delivery retry scheduled').map((l) => l.retryInMs as number),
    outcomes: (eventId) => of(eventId).map((l) => String(l.msg).replace(/^webhook delivery /, '')),
  };
}
