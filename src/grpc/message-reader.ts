import { createRequire } from 'node:module';
import type * as Zlib from 'node:zlib';

/** Bytes of a gRPC message's prefix: a compressed flag, then the length (big-endian u32). */
export const MESSAGE_PREFIX_BYTES = 5;

/**
 * Why a call's request cannot be decided. Every one is answered by the method (a denied
 * CheckResponse for ext_authz), never a gRPC error status; `detail` says what was wrong.
 */
export interface RequestRefusal {
  readonly problem: 'too_large' | 'second_message' | 'no_message' | 'truncated' | 'compression';
  readonly detail: string;
}

/** The message encodings read: gzip and deflate as grpc-js and Envoy may send them, identity. */
const DECOMPRESSORS = ['gzip', 'deflate'] as const;

let zlib: typeof Zlib | undefined;
/** node:zlib, loaded the first time a compressed message comes (Envoy sends none). */
function zlibModule(): typeof Zlib {
  return (zlib ??= createRequire(import.meta.url)('node:zlib') as typeof Zlib);
}

/**
 * The request side of one unary gRPC call, as it arrives: exactly one length-prefixed message,
 * then the end of the stream. The prefix is judged before the body is kept: a declared length
 * over `maxBytes` is refused at once, its bytes never read. Nothing is allocated for what a length
 * declares: the body is kept as the pieces that came, joined once whole. A second message, none,
 * or one cut short is a refusal, as is compression this reader cannot undo.
 *
 * @example
 * const r = new MessageReader(65_536, headers['grpc-encoding']);
 * stream.on('data', (c) => { const refused = r.push(c); ... });
 * stream.on('end', () => { const m = r.end(); ... });
 */
export class MessageReader {
  private prefix: Buffer | null = Buffer.alloc(MESSAGE_PREFIX_BYTES);
  private prefixFill = 0;
  /** The declared length of the message being read; -1 until its prefix is whole. */
  private length = -1;
  /** What arrived of its body: pieces of the chunks as they came (never a buffer of the declared size). */
  private parts: Buffer[] = [];
  private bodyFill = 0;
  private compressed = false;
  private done: Buffer | null = null;
  private compressedDone = false;
  /** Bytes taken so far that belong to a message not arrived whole (prefix included). */
  pending = 0;

  constructor(
    /** Largest message (bytes, after decompression too). */
    readonly maxBytes: number,
    /** The call's `grpc-encoding` header, if any. */
    private readonly encoding: string | undefined,
  ) {}

  /** Takes the next bytes of the stream; a refusal ends the reading (what follows is not read). */
  push(chunk: Buffer): RequestRefusal | undefined {
    let at = 0;
    while (at < chunk.length) {
      if (this.done !== null) return { problem: 'second_message', detail: 'more than one message in a unary call' };
      if (this.length < 0) {
        const prefix = this.prefix!;
        const n = Math.min(MESSAGE_PREFIX_BYTES - this.prefixFill, chunk.length - at);
        chunk.copy(prefix, this.prefixFill, at, at + n);
        this.prefixFill += n;
        this.pending += n;
        at += n;
        if (this.prefixFill < MESSAGE_PREFIX_BYTES) return undefined;
        const flag = prefix[0]!;
        const length = prefix.readUInt32BE(1);
        if (flag > 1) return { problem: 'compression', detail: `message flag ${flag} (only 0 and 1 exist)` };
        if (length > this.maxBytes) return { problem: 'too_large', detail: `the message (${length} bytes) is larger than ${this.maxBytes} bytes` };
        this.compressed = flag === 1;
        this.length = length;
      }
      const n = Math.min(this.length - this.bodyFill, chunk.length - at);
      if (n > 0) this.parts.push(chunk.subarray(at, at + n));
      this.bodyFill += n;
      this.pending += n;
      at += n;
      if (this.bodyFill === this.length) {
        this.done = this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts, this.length);
        this.compressedDone = this.compressed;
        this.parts = [];
        this.prefix = null;
        this.pending = 0;
      }
    }
    return undefined;
  }

  /** The request side ended: the one message, decompressed, or why there is none. */
  end(): Buffer | RequestRefusal {
    if (this.done === null) {
      return this.pending === 0 ? { problem: 'no_message', detail: 'the call ended without a message' } : { problem: 'truncated', detail: `the call ended inside a message (${this.pending} bytes of it)` };
    }
    return this.compressedDone ? this.decompress(this.done) : this.done;
  }

  private decompress(data: Buffer): Buffer | RequestRefusal {
    const encoding = this.encoding;
    if (encoding === 'gzip' || encoding === 'deflate') {
      try {
        const z = zlibModule();
        const options = { maxOutputLength: Math.max(1, this.maxBytes) };
        return encoding === 'gzip' ? z.gunzipSync(data, options) : z.inflateSync(data, options);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        return code === 'ERR_BUFFER_TOO_LARGE'
          ? { problem: 'too_large', detail: `the message decompresses to more than ${this.maxBytes} bytes` }
          : { problem: 'compression', detail: `a ${encoding} message that does not decompress (${code ?? 'error'})` };
      }
    }
    return {
      problem: 'compression',
      detail: encoding === undefined || encoding === 'identity' ? 'a compressed message without a grpc-encoding' : `grpc-encoding "${encoding.slice(0, 32)}" (read: ${['identity', ...DECOMPRESSORS].join(', ')})`,
    };
  }
}
