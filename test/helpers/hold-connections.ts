import { request } from 'node:http';
import { connect, type Socket } from 'node:net';

/**
 * How a hostile peer holds a listener's connections:
 * - `keep-alive`: a `GET /x` now and every `everyMs` (3 s), reading each answer: an idle keep-alive
 *   connection most of the time;
 * - `trickle`: a request line, then one header line every `everyMs` (1 s), never the end of the
 *   headers: a request-less connection until the header timeout cuts it;
 * - `silent`: connects and sends nothing (no HTTP/2 preface either).
 * A cut connection is made again after `reconnectMs` (the pace of a client that reconnects when cut,
 * not a wait for anything).
 */
export type HoldMode = 'keep-alive' | 'trickle' | 'silent';

export interface HoldOptions {
  readonly host: string;
  readonly port: number;
  /** The address the connections come from, e.g. 127.0.0.2 (any 127.x works on Linux loopback). */
  readonly localAddress: string;
  readonly count: number;
  readonly mode: HoldMode;
  readonly everyMs?: number;
  readonly reconnectMs?: number;
  /** The request target the `trickle` mode starts (default `POST /webhooks`). */
  readonly trickleTarget?: string;
}

/** Connections from one peer, each made again when cut, until {@link Hold.stop}. */
export class Hold {
  private readonly sockets = new Set<Socket>();
  private stopped = false;
  /** Connections made (first and again). */
  connects = 0;
  /** Connections that were cut (by the listener or a reset). */
  cuts = 0;
  /** Connections open now (connected and not yet closed). */
  open = 0;

  constructor(private readonly o: HoldOptions) {
    for (let i = 0; i < o.count; i++) this.one();
  }

  private one(): void {
    if (this.stopped) return;
    const o = this.o;
    const s = connect({ host: o.host, port: o.port, localAddress: o.localAddress });
    this.sockets.add(s);
    this.connects++;
    let timer: NodeJS.Timeout | undefined;
    let connected = false;
    s.on('error', () => undefined);
    s.on('data', () => undefined);
    s.on('connect', () => {
      connected = true;
      this.open++;
      if (o.mode === 'keep-alive') {
        const ask = (): void => void s.write(`GET /x HTTP/1.1\r\nhost: ${o.host}\r\n\r\n`);
        ask();
        timer = setInterval(ask, o.everyMs ?? 3000);
      } else if (o.mode === 'trickle') {
        s.write(`${o.trickleTarget ?? 'POST /webhooks'} HTTP/1.1\r\nhost: ${o.host}\r\n`);
        let n = 0;
        timer = setInterval(() => s.write(`x-trickle-${n++}: y\r\n`), o.everyMs ?? 1000);
      }
    });
    s.on('close', () => {
      if (timer) clearInterval(timer);
      this.sockets.delete(s);
      if (connected) this.open--;
      if (this.stopped) return;
      this.cuts++;
      setTimeout(() => this.one(), o.reconnectMs ?? 50).unref();
    });
  }

  stop(): void {
    this.stopped = true;
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
  }
}

/**
 * One HTTP request on a connection of its own (no pool: every request is a new connection the
 * listener must admit), from `localAddress`. Resolves with the status, or `reset` (or the error's
 * code) when no answer came.
 */
export function requestOnNewConnection(o: {
  readonly url: string;
  readonly method: string;
  readonly headers: Record<string, string>;
  readonly body: string;
  readonly localAddress?: string;
}): Promise<{ status: number | string; body: string }> {
  return new Promise((resolve) => {
    const req = request(o.url, { method: o.method, headers: { ...o.headers, connection: 'close' }, agent: false, ...(o.localAddress ? { localAddress: o.localAddress } : {}) }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', (e: NodeJS.ErrnoException) => resolve({ status: e.code ?? 'reset', body: '' }));
    });
    req.on('error', (e: NodeJS.ErrnoException) => resolve({ status: e.code ?? 'reset', body: '' }));
    req.end(o.body);
  });
}
