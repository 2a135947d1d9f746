import { gzipSync } from 'node:zlib';
import { connect, constants, type ClientHttp2Session, type ClientHttp2Stream, type IncomingHttpHeaders } from 'node:http2';
import { connect as netConnect } from 'node:net';
import { CheckRequestType, CheckResponseType, type CheckResponse } from './grpc.js';

/**
 * A raw HTTP/2 client of the gRPC listener (node:http2, no gRPC library): it sends exactly the
 * bytes a test gives, malformed framing included, and reads back what came, status and all.
 */

/** One gRPC message as framed on the wire: `flag` (0, or 1 for compressed), the length, the bytes. */
export function grpcFrame(message: Buffer, flag = 0, declaredLength = message.length): Buffer {
  const prefix = Buffer.alloc(5);
  prefix[0] = flag;
  prefix.writeUInt32BE(declaredLength, 1);
  return Buffer.concat([prefix, message]);
}

/** A CheckRequest's bytes (protobufjs, independent of the sidecar's reader). */
export function checkRequestBytes(req: Record<string, unknown>): Buffer {
  return Buffer.from(CheckRequestType().encode(req).finish());
}

export const gzip = (b: Buffer): Buffer => gzipSync(b);

/** What came back on one stream. */
export interface RawAnswer {
  /** The HTTP status (`:status`), 0 when the stream ended without headers. */
  readonly httpStatus: number;
  /** `grpc-status` from the trailers (or a trailers-only response); undefined when there was none. */
  readonly grpcStatus: number | undefined;
  readonly grpcMessage: string | undefined;
  /** The messages of the response, unframed. */
  readonly messages: Buffer[];
  /** The stream's RST_STREAM code (0 when it closed cleanly). */
  readonly rstCode: number;
}

/** The CheckResponse of a raw answer: its one message decoded. */
export function checkResponseOf(a: RawAnswer): CheckResponse {
  if (a.messages.length !== 1) throw new Error(`expected one message, got ${a.messages.length} (grpc-status ${a.grpcStatus}, http ${a.httpStatus})`);
  return CheckResponseType().toObject(CheckResponseType().decode(a.messages[0]!), { enums: String, oneofs: true, defaults: false }) as CheckResponse;
}

/** An HTTP/2 connection to `target` (`127.0.0.1:port`), from `localAddress` if given. */
export function h2Connect(target: string, localAddress?: string): Promise<ClientHttp2Session> {
  const [host, port] = [target.slice(0, target.lastIndexOf(':')), Number(target.slice(target.lastIndexOf(':') + 1))];
  return new Promise((resolve, reject) => {
    const session = connect(`http://${host}:${port}`, { createConnection: () => netConnect({ host, port, ...(localAddress ? { localAddress } : {}) }) });
    session.once('connect', () => resolve(session));
    session.once('error', reject);
  });
}

export interface RawCallOptions {
  readonly path?: string;
  readonly headers?: Record<string, string>;
  /** Written in order, each as it is. */
  readonly chunks?: readonly Buffer[];
  /** End the request side after the chunks (default true); false holds it open. */
  readonly end?: boolean;
}

/** Starts one call on `session`; `answer` resolves when the stream closes. */
export function rawCall(session: ClientHttp2Session, o: RawCallOptions = {}): { stream: ClientHttp2Stream; answer: Promise<RawAnswer> } {
  const stream = session.request({
    ':method': 'POST',
    ':path': o.path ?? '/envoy.service.auth.v3.Authorization/Check',
    'content-type': 'application/grpc',
    te: 'trailers',
    ...o.headers,
  });
  const answer = new Promise<RawAnswer>((resolve) => {
    let httpStatus = 0;
    let head: IncomingHttpHeaders = {};
    let trailers: IncomingHttpHeaders = {};
    const body: Buffer[] = [];
    stream.on('response', (h) => {
      head = h;
      httpStatus = Number(h[':status'] ?? 0);
    });
    stream.on('trailers', (t) => (trailers = t));
    stream.on('data', (c: Buffer) => body.push(c));
    stream.on('error', () => undefined);
    stream.on('close', () => {
      const all = Buffer.concat(body);
      const messages: Buffer[] = [];
      for (let at = 0; at + 5 <= all.length; ) {
        const n = all.readUInt32BE(at + 1);
        messages.push(all.subarray(at + 5, at + 5 + n));
        at += 5 + n;
      }
      const status = trailers['grpc-status'] ?? head['grpc-status'];
      const message = trailers['grpc-message'] ?? head['grpc-message'];
      resolve({
        httpStatus,
        grpcStatus: status === undefined ? undefined : Number(status),
        grpcMessage: message === undefined ? undefined : decodeURIComponent(String(message)),
        messages,
        rstCode: stream.rstCode ?? constants.NGHTTP2_NO_ERROR,
      });
    });
  });
  for (const c of o.chunks ?? []) stream.write(c);
  if (o.end ?? true) stream.end();
  return { stream, answer };
}
