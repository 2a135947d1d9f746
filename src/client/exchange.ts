import { Agent, request, type ClientRequest, type IncomingMessage } from 'node:http';
import type { RawAnswer } from './read-answer.js';
import type { CallOptions, ClientCause, NotAllowed } from './types.js';

/** An answer read whole, or why there is none (never an allowed result). */
export type Raw = RawAnswer | NotAllowed;

/** Where the sidecar's decision listener is: a TCP host and port, or a Unix socket. */
export type SidecarAddress = { readonly host: string; readonly port: number } | { readonly socketPath: string };

/**
 * Idle kept-alive connections are closed after this long (ms): shorter than the sidecar's own
 * keep-alive (65 s), so the client, not the server, retires a connection, and a request never
 * goes out on one the server is closing.
 */
const IDLE_CONNECTION_MS = 30_000;

/**
 * The client's one transport: POSTs on node's own `http` (no dependency), over kept-alive
 * connections to one sidecar, each call under one deadline and a cap on the answer's size. Node's
 * HTTP parser is strict (a malformed status line or header, two differing lengths: an error, never an
 * answer), it decodes no content coding (a gzip body stays bytes, which are not JSON), and it never
 * follows a redirect.
 */
export class SidecarConnection {
  private readonly agent: Agent;
  private readonly target: { readonly host?: string; readonly port?: number; readonly socketPath?: string };
  private readonly hostHeader: string;
  private inFlight = 0;
  private drained: (() => void) | null = null;
  private closed = false;

  constructor(address: SidecarAddress, connections: number) {
    this.agent = new Agent({ keepAlive: true, maxSockets: connections, maxFreeSockets: connections, timeout: IDLE_CONNECTION_MS, scheduling: 'lifo' });
    if ('socketPath' in address) {
      this.target = { socketPath: address.socketPath };
      this.hostHeader = 'localhost';
    } else {
      this.target = { host: address.host, port: address.port };
      this.hostHeader = `${address.host.includes(':') ? `[${address.host}]` : address.host}:${address.port}`;
    }
  }

  /**
   * POSTs `body` and reads the whole answer under one deadline (`timeoutMs`) and the cap. A
   * connection that failed before any answer came is tried once more within the deadline (a
   * kept-alive connection the sidecar closed as it was reused); nothing that answered is ever retried.
   */
  post(path: string, body: string, cap: number, timeoutMs: number, options: CallOptions): Promise<Raw> {
    if (this.closed) return Promise.resolve(unavailable('closed'));
    if (options.signal?.aborted) return Promise.resolve(unavailable('aborted'));
    this.inFlight++;
    return new Promise<Raw>((resolve) => {
      new Call(this, path, Buffer.from(body, 'utf8'), cap, timeoutMs, options.signal, (r) => {
        if (--this.inFlight === 0) this.drained?.();
        resolve(r);
      }).send();
    });
  }

  /** Closes the kept-alive connections once the calls in flight are done; later calls are `unavailable`/`closed`. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.inFlight > 0) await new Promise<void>((resolve) => (this.drained = resolve));
    this.agent.destroy();
  }

  /** One request on one of the kept-alive connections. */
  request(path: string, length: number): ClientRequest {
    return request({
      ...this.target,
      agent: this.agent,
      method: 'POST',
      path,
      // Raw pairs: node takes them as they are, without a setHeader per name.
      headers: ['host', this.hostHeader, 'content-type', 'application/json', 'accept', 'application/json', 'content-length', String(length)],
    });
  }
}

/**
 * One call: its deadline (one timer, cleared when it ends), the caller's signal, at most two
 * attempts, and the answer read whole. Every way it ends goes through {@link finish}, once.
 */
class Call {
  private settled = false;
  private attempt = 0;
  private req: ClientRequest | null = null;
  private readonly timer: NodeJS.Timeout;
  private readonly onAbort: (() => void) | null;

  constructor(
    private readonly connection: SidecarConnection,
    private readonly path: string,
    private readonly payload: Buffer,
    private readonly cap: number,
    timeoutMs: number,
    private readonly signal: AbortSignal | undefined,
    private readonly done: (r: Raw) => void,
  ) {
    // Unref'd: a call in flight keeps the process alive through its socket, not through its deadline.
    this.timer = setTimeout(() => this.stop(unavailable('timeout')), timeoutMs);
    this.timer.unref();
    this.onAbort = signal ? () => this.stop(unavailable('aborted')) : null;
    if (this.onAbort) signal!.addEventListener('abort', this.onAbort, { once: true });
  }

  send(): void {
    this.attempt++;
    const req = this.connection.request(this.path, this.payload.length);
    this.req = req;
    // Once an answer began, a failure is an answer cut short, never a connection to try again.
    let answered = false;
    req.on('error', (err) => {
      if (this.settled || req !== this.req) return;
      if (answered) return this.finish(unavailable('incomplete_body'));
      const why = transportFailure(err);
      if (why.cause === 'connection_reset' && this.attempt === 1) return this.send();
      this.finish(why);
    });
    req.on('response', (res) => {
      answered = true;
      this.read(res);
    });
    req.end(this.payload);
  }

  /** The deadline passed or the caller aborted: the call ends now, and its request with it. */
  private stop(why: NotAllowed): void {
    if (this.settled) return;
    this.finish(why);
    this.req?.destroy();
  }

  private finish(r: Raw): void {
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.timer);
    if (this.onAbort) this.signal!.removeEventListener('abort', this.onAbort);
    this.done(r);
  }

  /** Reads one answer whole, within the cap; an answer cut short is `incomplete_body`. */
  private read(res: IncomingMessage): void {
    const status = res.statusCode ?? 0;
    const tooLarge = (): void => {
      this.finish({ allowed: false, kind: 'unexpected_answer', cause: 'body_too_large', status });
      res.destroy();
    };
    if (Number(res.headers['content-length']) > this.cap) return tooLarge();
    const chunks: Buffer[] = [];
    let size = 0;
    res.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > this.cap) return tooLarge();
      chunks.push(chunk);
    });
    res.on('end', () => {
      const raw = res.rawHeaders;
      this.finish({
        status,
        contentType: single(raw, 'content-type'),
        body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size),
        decisionId: single(raw, 'x-consent-decision-id'),
        source: single(raw, 'x-consent-decision-source'),
      });
    });
    res.on('error', () => this.finish(unavailable('incomplete_body')));
    res.on('close', () => {
      if (!res.complete) this.finish(unavailable('incomplete_body'));
    });
  }
}

/** A header's value when it was given exactly once; a repeated header is none (node would keep one of them). */
function single(raw: readonly string[], name: string): string | undefined {
  let found: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.length !== name.length || raw[i]!.toLowerCase() !== name) continue;
    if (found !== undefined) return undefined;
    found = raw[i + 1]!;
  }
  return found;
}

export function unavailable(cause: ClientCause, detail?: string): NotAllowed {
  return Object.freeze({ allowed: false, kind: 'unavailable', cause, ...(detail === undefined ? {} : { detail }) });
}

const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOENT', 'EACCES', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL', 'ETIMEDOUT', 'ENOTSOCK']);

/** A failure before any answer: the sidecar not there, the connection cut, or bytes that are not HTTP. */
function transportFailure(err: unknown): NotAllowed {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && UNREACHABLE.has(code)) return unavailable('unreachable', code);
  if (typeof code === 'string' && code.startsWith('HPE_')) return Object.freeze({ allowed: false, kind: 'unexpected_answer', cause: 'malformed', detail: `not HTTP (${code})` });
  return unavailable('connection_reset', typeof code === 'string' ? code : undefined);
}
