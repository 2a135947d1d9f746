/**
 * The protobuf wire format, as much of it as the sidecar reads and writes: varints, length-delimited
 * fields, and skipping whatever it does not read. Reading is strict where a lax reader would have
 * to guess: a truncated field, a length past the end, a group (proto3 has none) or field number 0
 * is a {@link WireError}, never a best effort.
 */

export const WIRE_VARINT = 0;
export const WIRE_I64 = 1;
export const WIRE_LEN = 2;
export const WIRE_I32 = 5;

/** The bytes are not a protobuf message (the caller turns it into a refusal). */
export class WireError extends Error {}

/** Reads fields from `buf[start, end)`; positions are absolute in `buf`. */
export class ProtoReader {
  pos: number;

  constructor(
    readonly buf: Uint8Array,
    start = 0,
    readonly end = buf.length,
  ) {
    this.pos = start;
  }

  get done(): boolean {
    return this.pos >= this.end;
  }

  /** A varint of up to 64 bits; above 2^53 it loses precision, which only skipping ever meets. */
  varint(): number {
    let result = 0;
    let factor = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new WireError('truncated varint');
      const b = this.buf[this.pos++]!;
      result += (b & 0x7f) * factor;
      if (b < 0x80) return result;
      factor *= 128;
    }
    throw new WireError('varint longer than 10 bytes');
  }

  /** The next field's tag: `field << 3 | wire`, with a field number of at least 1 and a known wire type. */
  tag(): number {
    const tag = this.varint();
    if (tag > 0xffffffff) throw new WireError('tag out of range');
    const wire = tag % 8;
    if (tag < 8) throw new WireError('field number 0');
    if (wire !== WIRE_VARINT && wire !== WIRE_I64 && wire !== WIRE_LEN && wire !== WIRE_I32) throw new WireError(`wire type ${wire}`);
    return tag;
  }

  /** A length-delimited field's bounds, `[start, end)`, checked against the message's end. */
  span(): [number, number] {
    const length = this.varint();
    const start = this.pos;
    if (length > this.end - start) throw new WireError('length past the end of the message');
    this.pos = start + length;
    return [start, this.pos];
  }

  /** Skips one field's value of wire type `wire`. */
  skip(wire: number): void {
    switch (wire) {
      case WIRE_VARINT:
        this.varint();
        return;
      case WIRE_I64:
        this.advance(8);
        return;
      case WIRE_LEN:
        this.span();
        return;
      case WIRE_I32:
        this.advance(4);
        return;
      default:
        throw new WireError(`wire type ${wire}`);
    }
  }

  private advance(n: number): void {
    if (n > this.end - this.pos) throw new WireError('truncated fixed-width field');
    this.pos += n;
  }
}

/** Whether `buf[start, end)` is `name` (lower-case ASCII) up to ASCII case, without making a string. */
export function bytesEqualLower(buf: Uint8Array, start: number, end: number, name: Uint8Array): boolean {
  if (end - start !== name.length) return false;
  for (let i = 0; i < name.length; i++) {
    let b = buf[start + i]!;
    if (b >= 0x41 && b <= 0x5a) b += 0x20;
    if (b !== name[i]) return false;
  }
  return true;
}

/** Whether `buf[start, end)` is exactly `name`. */
export function bytesEqual(buf: Uint8Array, start: number, end: number, name: Uint8Array): boolean {
  if (end - start !== name.length) return false;
  for (let i = 0; i < name.length; i++) if (buf[start + i] !== name[i]) return false;
  return true;
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** `buf[start, end)` as UTF-8 text, or null when the bytes are not UTF-8 (proto3 strings must be). */
export function utf8At(buf: Uint8Array, start: number, end: number): string | null {
  try {
    return utf8.decode(buf.subarray(start, end));
  } catch {
    return null;
  }
}

/** Builds a message: fields appended in order, nested messages as finished byte strings. */
export class ProtoWriter {
  private readonly parts: Buffer[] = [];
  private size = 0;

  private push(b: Buffer): this {
    this.parts.push(b);
    this.size += b.length;
    return this;
  }

  private static varintBytes(n: number): Buffer {
    const out: number[] = [];
    let v = n;
    while (v >= 0x80) {
      out.push((v % 128) | 0x80);
      v = Math.floor(v / 128);
    }
    out.push(v);
    return Buffer.from(out);
  }

  /** A varint field (non-negative integers: enums, codes). */
  varint(field: number, n: number): this {
    return this.push(Buffer.concat([ProtoWriter.varintBytes(field * 8 + WIRE_VARINT), ProtoWriter.varintBytes(n)]));
  }

  /** A length-delimited field: bytes, a UTF-8 string or a finished nested message. */
  bytes(field: number, value: Uint8Array | string): this {
    const b = typeof value === 'string' ? Buffer.from(value, 'utf8') : Buffer.from(value.buffer, value.byteOffset, value.byteLength);
    return this.push(Buffer.concat([ProtoWriter.varintBytes(field * 8 + WIRE_LEN), ProtoWriter.varintBytes(b.length), b]));
  }

  /** A `double` field (little-endian IEEE 754). */
  double(field: number, n: number): this {
    const b = Buffer.allocUnsafe(8);
    b.writeDoubleLE(n, 0);
    return this.push(Buffer.concat([ProtoWriter.varintBytes(field * 8 + WIRE_I64), b]));
  }

  finish(): Buffer {
    return Buffer.concat(this.parts, this.size);
  }
}
