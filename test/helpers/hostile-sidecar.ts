import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

/**
 * What the fake sidecar does with one request: write `bytes` (a whole response, or any part of
 * one, or bytes that are not HTTP), then keep the connection for the next request, end it, cut it
 * at once (`destroy`: a reset after whatever was written), or `hold` it open and silent until the
 * client gives up.
 */
export interface Script {
  readonly bytes: Buffer;
  readonly then: 'keep' | 'end' | 'destroy' | 'hold';
}

/**
 * A sidecar that answers whatever it is told, byte for byte, on a raw TCP server or a Unix socket:
 * requests are parsed just enough (headers, `content-length` body) to know which script answers
 * them, by the `userReference` the client sent (`case-<n>`). Connections are kept alive between
 * scripts that keep them.
 */
export class HostileSidecar {
  private readonly server: Server;
  private readonly scripts = new Map<string, Script>();
  private readonly sockets = new Set<Socket>();
  /** Requests received (a retried one counts twice). */
  requests = 0;
  /** Connections accepted. */
  connections = 0;

  constructor() {
    this.server = createServer((socket) => this.serve(socket));
  }

  /** Listens on loopback port 0, or on the Unix socket `path`; resolves with the client's base URL. */
  async listen(path?: string): Promise<string> {
    await new Promise<void>((resolve) => (path ? this.server.listen(path, resolve) : this.server.listen(0, '127.0.0.1', resolve)));
    return path ? `unix:${path}` : `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Sets the script for the requests whose `userReference` is `name`. */
  script(name: string, s: Script): void {
    this.scripts.set(name, s);
  }

  forget(name: string): void {
    this.scripts.delete(name);
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private serve(socket: Socket): void {
    this.connections++;
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
    socket.on('error', () => undefined);
    let pending = Buffer.alloc(0);
    let busy = false;
    const next = (): void => {
      if (busy) return;
      const end = pending.indexOf('\r\n\r\n');
      if (end === -1) return;
      const head = pending.subarray(0, end).toString('latin1');
      const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
      if (pending.length < end + 4 + length) return;
      const body = pending.subarray(end + 4, end + 4 + length).toString('utf8');
      pending = pending.subarray(end + 4 + length);
      this.requests++;
      busy = true;
      this.answer(socket, body, () => {
        busy = false;
        next();
      });
    };
    socket.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      next();
    });
  }

  private answer(socket: Socket, body: string, done: () => void): void {
    let name = '';
    try {
      const parsed = JSON.parse(body) as { userReference?: unknown; checks?: { userReference?: unknown }[] };
      name = String(parsed.userReference ?? parsed.checks?.[0]?.userReference ?? '');
    } catch {
      // no script: the connection is cut below
    }
    const s = this.scripts.get(name);
    if (!s) {
      socket.destroy();
      return;
    }
    if (s.bytes.length > 0) socket.write(s.bytes);
    switch (s.then) {
      case 'keep':
        done();
        return;
      case 'end':
        socket.end();
        return;
      case 'destroy':
        // After the bytes are out, so a truncated answer is truncated, not lost.
        socket.write(Buffer.alloc(0), () => socket.destroy());
        return;
      case 'hold':
        return;
    }
  }
}

/** A whole HTTP/1.1 response: `head` lines as given (no framing added unless `length`), then the body. */
export function response(status: number, headers: readonly (readonly [string, string])[], body: Buffer | string, o: { length?: boolean; reason?: string } = {}): Buffer {
  const b = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  const lines = [`HTTP/1.1 ${status} ${o.reason ?? 'X'}`, ...headers.map(([n, v]) => `${n}: ${v}`)];
  if (o.length !== false) lines.push(`content-length: ${b.length}`);
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), b]);
}

/** A body in chunked transfer coding, cut in the pieces given by `cuts` (offsets). */
export function chunked(body: Buffer, cuts: readonly number[], terminate = true): Buffer {
  const at = [...new Set(cuts.map((c) => Math.max(0, Math.min(body.length, c))))].sort((a, b) => a - b);
  const parts: Buffer[] = [];
  let from = 0;
  for (const to of [...at, body.length]) {
    if (to > from) parts.push(Buffer.from(`${(to - from).toString(16)}\r\n`), body.subarray(from, to), Buffer.from('\r\n'));
    from = Math.max(from, to);
  }
  if (terminate) parts.push(Buffer.from('0\r\n\r\n'));
  return Buffer.concat(parts);
}
