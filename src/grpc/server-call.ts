import { constants, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import { performance } from 'node:perf_hooks';
import { Deadline, type DeadlineQueue } from '../lib/deadline-queue.js';
import type { BudgetHolder, UnverifiedBudget } from '../webhooks/unverified-budget.js';
import { answerByFor } from './grpc-timeout.js';
import { MESSAGE_PREFIX_BYTES, MessageReader, type RequestRefusal } from './message-reader.js';

/**
 * Why a call's request was not read whole: what {@link MessageReader} refuses, the request
 * deadline (`request_timeout`), or the byte budget (`overload`: the sidecar's own limit, not the
 * caller's fault).
 */
export type CallRefusal = RequestRefusal | { readonly problem: 'request_timeout' | 'overload'; readonly detail: string };

/** A method as the listener serves it: one request message, then what the method writes on `Call`. */
export interface UnaryMethod<Call = GrpcCall> {
  /** Largest request message read (bytes). */
  readonly maxBytes: number;
  /** The request arrived whole. */
  request(message: Buffer, call: Call): void;
  /** The request could not be read: the method answers all the same. */
  refused(why: CallRefusal, call: Call): void;
}

/** What every call of one listener shares: the budget of unfinished bytes and the request deadline. */
export interface CallLimits {
  /** Bytes of requests not arrived whole, across all streams (`--grpc-max-unfinished-bytes`). */
  readonly budget: UnverifiedBudget;
  /** Deadlines of requests still arriving, all `requestTimeoutMs` long. */
  readonly arrivals: DeadlineQueue;
  /** Time a request has to arrive whole from its stream's start (ms, `--grpc-request-timeout-ms`). */
  readonly requestTimeoutMs: number;
}

/** google.rpc.Code values written as gRPC statuses (never for a Check: those are CheckResponses). */
export const STATUS = { OK: 0, INVALID_ARGUMENT: 3, NOT_FOUND: 5, UNIMPLEMENTED: 12, UNAVAILABLE: 14 } as const;

/**
 * Time between an answer written before the request ended and the stream's reset (ms). The reset
 * must not overtake the answer's last frames, which node hands to the connection on the next turn
 * of the event loop; the stream's connection stays open, so nothing the client has not read is
 * lost by it. Meanwhile what the client sends is read and dropped (a paused stream would hold the
 * connection's flow-control window from every other call on it): at loopback speed, a short grace.
 */
const DRAIN_GRACE_MS = 100;

/** Why a call is shed at the listener's cap of open calls. */
export const STREAM_CAP_DETAIL = 'the listener holds its most open calls (--grpc-max-streams)';

const RESPONSE_HEADERS = {
  [constants.HTTP2_HEADER_STATUS]: 200,
  [constants.HTTP2_HEADER_CONTENT_TYPE]: 'application/grpc+proto',
  'grpc-accept-encoding': 'identity,deflate,gzip',
};
const OK_TRAILERS = { 'grpc-status': '0' };

/** One message as gRPC frames it: flag 0 (not compressed), length, bytes. */
function frame(message: Buffer): Buffer {
  const out = Buffer.allocUnsafe(MESSAGE_PREFIX_BYTES + message.length);
  out[0] = 0;
  out.writeUInt32BE(message.length, 1);
  message.copy(out, MESSAGE_PREFIX_BYTES);
  return out;
}

/** A status with no message (trailers-only), for what is not a Check. */
export function respondStatus(stream: ServerHttp2Stream, code: number, message: string): void {
  if (stream.headersSent || stream.closed || stream.destroyed) return;
  stream.respond({ ...RESPONSE_HEADERS, 'grpc-status': String(code), 'grpc-message': encodeURIComponent(message) }, { endStream: true });
}

/**
 * After an answer written before the request ended: what still comes is let flow away, and a
 * client still sending after {@link DRAIN_GRACE_MS} has its stream reset (NO_ERROR: the answer was
 * whole). A reset at once could overtake the answer's last frames.
 */
export function drainThenCut(stream: ServerHttp2Stream): void {
  if (stream.readableEnded || stream.closed) return;
  stream.resume();
  const cut = setTimeout(() => stream.close(constants.NGHTTP2_NO_ERROR), DRAIN_GRACE_MS);
  cut.unref();
  stream.once('close', () => clearTimeout(cut));
}

/**
 * One call on an HTTP/2 stream: its request read under the listener's limits (bytes taken from
 * the shared budget as they arrive and given back once the request is whole; a deadline for it to
 * arrive), and its answer written once. A client answered before it finished sending gets
 * {@link DRAIN_GRACE_MS} to stop ({@link drainThenCut}).
 */
export class GrpcCall extends Deadline implements BudgetHolder {
  held = 0;
  /** An answer (or a status) was written, or the stream is gone. */
  sent = false;
  /** Called once when the stream closes, whoever closed it. */
  onClose: (() => void) | undefined;
  /**
   * When the caller's `grpc-timeout` (from the stream's start) leaves just room for an answer to
   * reach it (monotonic ms; `answerByFor`); Infinity with no header, or one not well-formed.
   */
  readonly answerBy: number;
  private reader: MessageReader | null;

  constructor(
    readonly stream: ServerHttp2Stream,
    headers: IncomingHttpHeaders,
    private readonly method: UnaryMethod,
    private readonly limits: CallLimits,
    /** The peer the stream's connection is counted to. */
    readonly peer: string,
  ) {
    const startedAt = performance.now();
    super(startedAt + limits.requestTimeoutMs);
    // Parsed only when sent (Envoy sends it for a call with a timeout, which is every call by default).
    const timeout = headers['grpc-timeout'];
    this.answerBy = typeof timeout === 'string' ? answerByFor(timeout, startedAt) : Infinity;
    const encoding = headers['grpc-encoding'];
    this.reader = new MessageReader(method.maxBytes, typeof encoding === 'string' ? encoding : undefined);
    limits.arrivals.add(this);
    stream.on('data', this.onData);
    stream.once('end', this.onEnd);
    stream.once('close', this.onStreamClose);
    stream.on('error', () => undefined);
  }

  private readonly onData = (chunk: Buffer): void => {
    const reader = this.reader;
    // Not reading any more (answered early): what still comes is let flow away, unbuffered.
    if (reader === null) return;
    if (!this.limits.budget.take(this, chunk.length)) {
      this.refuse({ problem: 'overload', detail: 'the listener holds its most of requests not arrived whole (--grpc-max-unfinished-bytes)' });
      return;
    }
    const refused = reader.push(chunk);
    if (refused !== undefined) this.refuse(refused);
  };

  private readonly onEnd = (): void => {
    const reader = this.reader;
    if (reader === null) return;
    this.stopReading();
    const m = reader.end();
    this.guarded(() => (Buffer.isBuffer(m) ? this.method.request(m, this) : this.method.refused(m, this)));
  };

  private readonly onStreamClose = (): void => {
    this.stopReading();
    this.sent = true;
    const onClose = this.onClose;
    this.onClose = undefined;
    onClose?.();
  };

  /** The request deadline passed before the request arrived whole. */
  timeout(): void {
    this.refuse({ problem: 'request_timeout', detail: `the request did not arrive whole within ${this.limits.requestTimeoutMs} ms (--grpc-request-timeout-ms)` });
  }

  /**
   * The listener holds its most open calls (`--grpc-max-streams`): answered at once, before its
   * request is read (a Check a 503 `overload` denial), its stream then let flow away and closed.
   */
  shed(): void {
    this.refuse({ problem: 'overload', detail: STREAM_CAP_DETAIL });
  }

  /** The budget cuts this call to make room for a smaller one. */
  evict(): void {
    this.refuse({ problem: 'overload', detail: 'the listener holds its most of requests not arrived whole (--grpc-max-unfinished-bytes)' });
  }

  private refuse(why: CallRefusal): void {
    if (this.reader === null) return;
    this.stopReading();
    this.guarded(() => this.method.refused(why, this));
    drainThenCut(this.stream);
  }

  /**
   * Runs a method's part. The Check answers every error itself; should any method throw, the
   * stream is reset rather than left open or the process ended by an event handler's throw.
   */
  private guarded(part: () => void): void {
    try {
      part();
    } catch {
      this.sent = true;
      if (!this.stream.destroyed) this.stream.close(constants.NGHTTP2_INTERNAL_ERROR);
    }
  }

  private stopReading(): void {
    if (this.reader === null) return;
    this.reader = null;
    this.limits.arrivals.remove(this);
    this.limits.budget.release(this);
  }

  /** Writes `message` and status OK, once; nothing when the stream is gone. */
  send(message: Buffer): void {
    if (this.sent) return;
    this.sent = true;
    const stream = this.stream;
    if (stream.closed || stream.destroyed) return;
    stream.respond(RESPONSE_HEADERS, { waitForTrailers: true });
    stream.once('wantTrailers', () => stream.sendTrailers(OK_TRAILERS));
    stream.end(frame(message));
  }

  /** Ends the call with a status and no message (not for a Check), once. */
  fail(code: number, message: string): void {
    if (this.sent) return;
    this.sent = true;
    respondStatus(this.stream, code, message);
  }

  /** Server streaming: the headers now, then {@link write} each message, then {@link end}. */
  open(): void {
    if (this.sent || this.stream.closed || this.stream.destroyed) return;
    this.stream.respond(RESPONSE_HEADERS, { waitForTrailers: true });
  }

  write(message: Buffer): void {
    if (this.sent || this.stream.closed || this.stream.destroyed) return;
    this.stream.write(frame(message));
  }

  /** Ends a server stream with status OK. */
  end(): void {
    if (this.sent) return;
    this.sent = true;
    const stream = this.stream;
    if (stream.closed || stream.destroyed) return;
    stream.once('wantTrailers', () => stream.sendTrailers(OK_TRAILERS));
    stream.end();
  }
}
