import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { PATIENCE_MS } from './wait.js';

/** One request the scripted upstream received, with its raw body. */
export interface ReceivedRequest {
  readonly at: number;
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** A timed piece of a trickled body. */
export interface Chunk {
  readonly afterMs: number;
  readonly data: string;
}

/**
 * What the upstream does with one request. Every field is optional; the default is `200` with an
 * empty JSON object. `date: null` sends no `Date` header at all.
 */
export interface Reply {
  readonly status?: number;
  readonly headers?: Readonly<Record<string, string | readonly string[]>>;
  /** The `Date` header; a string as is, a number as epoch ms, `null` for none. Default: node's own. */
  readonly date?: string | number | null;
  /** A string is sent as is; anything else is JSON-serialised. */
  readonly body?: unknown;
  /** Wait this long before sending the headers. */
  readonly delayMs?: number;
  /** Send nothing until this settles (then `delayMs`, then the reply): the test decides when. */
  readonly hold?: Promise<unknown>;
  /**
   * Send the headers, then `data` every `everyMs` until the connection or the upstream is closed:
   * a body that never ends, however patient the reader. `body` and `chunks` are ignored.
   */
  readonly trickle?: { readonly everyMs: number; readonly data: string };
  /** Send the headers, then these pieces, each after its delay; `body` is ignored. */
  readonly chunks?: readonly Chunk[];
  /**
   * Faults:
   * - `reset`: destroy the socket before any response;
   * - `hang`: never answer (the request stays unanswered until the client or the upstream closes);
   * - `truncate`: declare `Content-Length` of the whole body, send half of it, destroy the socket;
   * - `destroy-after-chunks`: send the headers and `chunks`, then destroy the socket;
   * - `raw`: write `raw` on the socket as the whole response (odd status lines) and end it;
   * - `raw-keep-open`: write `raw` on the socket and leave the connection open (extra, unrequested responses).
   */
  readonly fault?: 'reset' | 'hang' | 'truncate' | 'destroy-after-chunks' | 'raw' | 'raw-keep-open';
  readonly raw?: string;
  /** After a normal response, write these bytes on the (idle, kept-alive) socket: an unrequested response. */
  readonly thenRaw?: { readonly afterMs: number; readonly raw: string };
}

export type ReplyFn = (req: ReceivedRequest) => Reply;

/**
 * A scriptable consent service on `127.0.0.1:0`. A test sets the default reply (`reply`) or queues
 * one-shot replies (`enqueue`, used in order of arrival, before the default), and reads what the
 * service received (`requests`, `count`, `checks`).
 */
export interface ScriptedUpstream {
  readonly url: string;
  readonly port: number;
  readonly requests: ReceivedRequest[];
  /** Requests received so far (any path). */
  readonly count: number;
  /** Requests received on `POST /v1/authorization/check`. */
  readonly checks: number;
  /** Sets the default reply for every request not served by the queue. */
  reply(r: Reply | ReplyFn): void;
  /** Queues one-shot replies, used before the default, in arrival order. */
  enqueue(...r: (Reply | ReplyFn)[]): void;
  /** Resolves once `count` reaches `n` (polls; fails after `timeoutMs`, default {@link PATIENCE_MS}). */
  waitForCount(n: number, timeoutMs?: number): Promise<void>;
  /** `thenRaw` writes that reached the socket (their write callback ran). */
  readonly pushes: number;
  /** Connections that have closed, whichever side closed them. */
  readonly closedConnections: number;
  /** Forgets recorded requests (the counts restart at 0). */
  resetLog(): void;
  close(): Promise<void>;
}

export const CHECK_PATH = '/v1/authorization/check';

function serialise(body: unknown): string {
  if (body === undefined) return '{}';
  return typeof body === 'string' ? body : JSON.stringify(body);
}

export async function startUpstream(initial: Reply | ReplyFn = { status: 200, body: {} }): Promise<ScriptedUpstream> {
  const requests: ReceivedRequest[] = [];
  const queue: (Reply | ReplyFn)[] = [];
  let fallback: Reply | ReplyFn = initial;
  const timers = new Set<NodeJS.Timeout>();
  const sockets = new Set<Socket>();
  let closed = false;
  let pushes = 0;
  let closedConnections = 0;

  const later = (ms: number, fn: () => void): void => {
    if (ms <= 0) {
      fn();
      return;
    }
    const t = setTimeout(() => {
      timers.delete(t);
      fn();
    }, ms);
    timers.add(t);
  };

  const respond = (r: Reply, res: ServerResponse, socket: Socket): void => {
    if (res.destroyed || socket.destroyed) return;
    switch (r.fault) {
      case 'reset':
        socket.destroy();
        return;
      case 'hang':
        return;
      case 'raw':
        socket.end(r.raw ?? '');
        return;
      case 'raw-keep-open':
        // Bypass node's response object: the bytes go out as they are and the socket stays usable.
        socket.write(r.raw ?? '');
        return;
      default:
        break;
    }
    const headers: Record<string, string | readonly string[]> = { 'content-type': 'application/json', ...(r.headers ?? {}) };
    if (r.date === null) res.sendDate = false;
    else if (r.date !== undefined) headers.date = typeof r.date === 'number' ? new Date(r.date).toUTCString() : r.date;
    const status = r.status ?? 200;

    if (r.trickle) {
      const { everyMs, data } = r.trickle;
      res.writeHead(status, headers as Record<string, string | string[]>);
      res.flushHeaders();
      const drip = (): void => {
        if (res.destroyed || socket.destroyed || closed) return;
        res.write(data);
        later(everyMs, drip);
      };
      later(everyMs, drip);
      return;
    }

    if (r.chunks) {
      res.writeHead(status, headers as Record<string, string | string[]>);
      res.flushHeaders();
      let wait = 0;
      for (const c of r.chunks) {
        wait += c.afterMs;
        later(wait, () => {
          if (!res.destroyed) res.write(c.data);
        });
      }
      later(wait, () => {
        if (r.fault === 'destroy-after-chunks') socket.destroy();
        else if (!res.destroyed) res.end();
      });
      return;
    }

    const body = Buffer.from(serialise(r.body), 'utf8');
    if (r.fault === 'truncate') {
      res.writeHead(status, { ...headers, 'content-length': String(body.length) } as Record<string, string | string[]>);
      res.write(body.subarray(0, Math.floor(body.length / 2)));
      later(10, () => socket.destroy());
      return;
    }
    const noBody = status === 204 || status === 304 || (status >= 100 && status < 200);
    if (!noBody && headers['content-length'] === undefined) headers['content-length'] = String(body.length);
    res.writeHead(status, headers as Record<string, string | string[]>);
    res.end(noBody ? undefined : body);
    const extra = r.thenRaw;
    if (extra) {
      later(extra.afterMs, () => {
        if (!socket.destroyed) socket.write(extra.raw, () => void pushes++);
      });
    }
  };

  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('error', () => undefined);
    req.on('end', () => {
      const received: ReceivedRequest = {
        at: Date.now(),
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      };
      requests.push(received);
      const script = queue.shift() ?? fallback;
      const r = typeof script === 'function' ? script(received) : script;
      const go = (): void => later(r.delayMs ?? 0, () => respond(r, res, req.socket));
      if (r.hold) void r.hold.then(go, go);
      else go();
    });
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => {
      sockets.delete(s);
      closedConnections++;
    });
    s.on('error', () => undefined);
  });
  server.on('clientError', (_err, socket) => socket.destroy());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    get count() {
      return requests.length;
    },
    get checks() {
      return requests.filter((r) => r.method === 'POST' && r.url === CHECK_PATH).length;
    },
    reply(r) {
      fallback = r;
    },
    enqueue(...r) {
      queue.push(...r);
    },
    get pushes() {
      return pushes;
    },
    get closedConnections() {
      return closedConnections;
    },
    async waitForCount(n, timeoutMs = PATIENCE_MS) {
      const until = Date.now() + timeoutMs;
      while (requests.length < n) {
        if (Date.now() > until) throw new Error(`upstream saw ${requests.length} requests, expected ${n}`);
        await new Promise((r) => setTimeout(r, 5));
      }
    },
    resetLog() {
      requests.length = 0;
    },
    close() {
      if (closed) return Promise.resolve();
      closed = true;
      for (const t of timers) clearTimeout(t);
      timers.clear();
      return new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      });
    },
  };
}

/** A well-formed ALLOW body. */
export const allow = (configKey: string, validUntil: number): Record<string, unknown> => ({ decision: 'ALLOW', configKey, validUntil });
/** A well-formed evaluated denial body. */
export const deny = (configKey: string): Record<string, unknown> => ({ decision: 'DENY', configKey });
/** A well-formed pre-evaluation denial body. */
export const preDeny = (reason: string): Record<string, unknown> => ({ decision: 'DENY', reason });

/**
 * The service as the client tests script it, by user reference: `alice` ALLOW for an hour,
 * `nobody` a pre-evaluation DENY (`customer_not_found`), `s500` a 500, anyone else an evaluated
 * DENY, all for `configKey`; any other path 404.
 */
export function decisionsByUser(configKey: string): ReplyFn {
  return (req) => {
    if (req.url !== CHECK_PATH) return { status: 404, body: {} };
    const user = (JSON.parse(req.body) as { userReference: string }).userReference;
    if (user === 'alice') return { body: allow(configKey, Date.now() + 3_600_000) };
    if (user === 'nobody') return { body: preDeny('customer_not_found') };
    if (user === 's500') return { status: 500, body: {} };
    return { body: deny(configKey) };
  };
}
