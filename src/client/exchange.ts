import { Agent, request, type IncomingMessage } from 'node:http';
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
  private readonly inFlight = new Set<Promise<Raw>>();
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
   * POSTs `body` and reads the whole answer under one deadline (`timeoutMs`, or the call's own) and
   * the cap. A connection that failed before any answer came is tried once more within the deadline
   * (a kept-alive connection the sidecar closed as it was reused); nothing that answered is ever retried.
   */
  post(path: string, body: string, cap: number, timeoutMs: number, options: CallOptions): Promise<Raw> {
    if (this.closed) return Promise.resolve(unavailable('closed'));
    const call = this.exchange(path, Buffer.from(body, 'utf8'), cap, timeoutMs, options);
    this.inFlight.add(call);
    void call.finally(() => this.inFlight.delete(call));
    return call;
  }

  /** Closes the kept-alive connections once the calls in flight are done; later calls are `unavailable`/`closed`. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.allSettled([...this.inFlight]);
    this.agent.destroy();
  }

  private async exchange(path: string, payload: Buffer, cap: number, timeoutMs: number, options: CallOptions): Promise<Raw> {
    const deadline = AbortSignal.timeout(timeoutMs);
    const signal = options.signal ? AbortSignal.any([options.signal, deadline]) : deadline;
    const stopped = (): NotAllowed | undefined => (options.signal?.aborted ? unavailable('aborted') : deadline.aborted ? unavailable('timeout') : undefined);
    for (let attempt = 1; ; attempt++) {
      const early = stopped();
      if (early) return early;
      const r = await this.once(path, payload, cap, signal, stopped);
      if ('allowed' in r && r.cause === 'connection_reset' && attempt === 1 && !stopped()) continue;
      return r;
    }
  }

  /** One request on one connection: the answer, or why there is none. */
  private once(path: string, payload: Buffer, cap: number, signal: AbortSignal, stopped: () => NotAllowed | undefined): Promise<Raw> {
    return new Promise((resolve) => {
      let settled = false;
      const finish = (r: Raw): void => {
        if (settled) return;
        settled = true;
        signal.removeEventListener('abort', onAbort);
        resolve(r);
      };
      const req = request({
        ...this.target,
        agent: this.agent,
        method: 'POST',
        path,
        headers: { host: this.hostHeader, 'content-type': 'application/json', accept: 'application/json', 'content-length': payload.length },
      });
      const onAbort = (): void => {
        finish(stopped() ?? unavailable('aborted'));
        req.destroy();
      };
      signal.addEventListener('abort', onAbort, { once: true });
      // Once an answer began, a failure is an answer cut short, never a connection to try again.
      let answered = false;
      req.on('error', (err) => finish(stopped() ?? (answered ? unavailable('incomplete_body') : transportFailure(err))));
      req.on('response', (res) => {
        answered = true;
        readAnswer(res, cap, finish, stopped);
      });
      req.end(payload);
    });
  }
}

/** Reads one answer whole, within `cap` bytes; an answer cut short is `incomplete_body`. */
function readAnswer(res: IncomingMessage, cap: number, finish: (r: Raw) => void, stopped: () => NotAllowed | undefined): void {
  const status = res.statusCode ?? 0;
  const tooLarge = (): void => {
    finish({ allowed: false, kind: 'unexpected_answer', cause: 'body_too_large', status });
    res.destroy();
  };
  if (Number(res.headers['content-length']) > cap) return tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  res.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size > cap) return tooLarge();
    chunks.push(chunk);
  });
  res.on('end', () => {
    const raw = res.rawHeaders;
    finish({
      status,
      contentType: single(raw, 'content-type'),
      body: Buffer.concat(chunks, size),
      decisionId: single(raw, 'x-consent-decision-id'),
      source: single(raw, 'x-consent-decision-source'),
    });
  });
  res.on('error', () => finish(stopped() ?? unavailable('incomplete_body')));
  res.on('close', () => {
    if (!res.complete) finish(stopped() ?? unavailable('incomplete_body'));
  });
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
