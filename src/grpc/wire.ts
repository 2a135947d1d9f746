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

/**
 * A message to write, as a tree of fields: `v` a varint (a non-negative integer: an enum, a code),
 * `s` a string (UTF-8), `b` bytes, `d` a double, `m` a nested message. Sized first, then written
 * into one buffer: one allocation per message, however deep.
 */
export type ProtoField =
  | readonly [field: number, kind: 'v', value: number]
  | readonly [field: number, kind: 's', value: string]
  | readonly [field: number, kind: 'b', value: Uint8Array]
  | readonly [field: number, kind: 'd', value: number]
  | readonly [field: number, kind: 'm', value: readonly ProtoField[]];

function varintSize(n: number): number {
  let size = 1;
  for (let v = n; v >= 0x80; v = Math.floor(v / 128)) size++;
  return size;
}

/** The payload size of a length-delimited or fixed field's value, or a varint's encoded size. */
function valueSize(f: ProtoField, sizes: Map<readonly ProtoField[], number>): number {
  switch (f[1]) {
    case 'v':
      return varintSize(f[2]);
    case 'd':
      return 8;
    case 's':
      return Buffer.byteLength(f[2], 'utf8');
    case 'b':
      return f[2].length;
    case 'm':
      return messageSize(f[2], sizes);
  }
}

function messageSize(fields: readonly ProtoField[], sizes: Map<readonly ProtoField[], number>): number {
  let size = 0;
  for (const f of fields) {
    const n = valueSize(f, sizes);
    size += varintSize(f[0] * 8) + (f[1] === 'v' || f[1] === 'd' ? n : varintSize(n) + n);
  }
  sizes.set(fields, size);
  return size;
}

function writeVarint(buf: Buffer, pos: number, n: number): number {
  let v = n;
  while (v >= 0x80) {
    buf[pos++] = (v % 128) | 0x80;
    v = Math.floor(v / 128);
  }
  buf[pos++] = v;
  return pos;
}

function writeFields(buf: Buffer, pos: number, fields: readonly ProtoField[], sizes: Map<readonly ProtoField[], number>): number {
  let p = pos;
  for (const f of fields) {
    switch (f[1]) {
      case 'v':
        p = writeVarint(buf, p, f[0] * 8 + WIRE_VARINT);
        p = writeVarint(buf, p, f[2]);
        break;
      case 'd':
        p = writeVarint(buf, p, f[0] * 8 + WIRE_I64);
        p = buf.writeDoubleLE(f[2], p);
        break;
      case 's':
        p = writeVarint(buf, p, f[0] * 8 + WIRE_LEN);
        p = writeVarint(buf, p, Buffer.byteLength(f[2], 'utf8'));
        p += buf.write(f[2], p, 'utf8');
        break;
      case 'b':
        p = writeVarint(buf, p, f[0] * 8 + WIRE_LEN);
        p = writeVarint(buf, p, f[2].length);
        buf.set(f[2], p);
        p += f[2].length;
        break;
      case 'm':
        p = writeVarint(buf, p, f[0] * 8 + WIRE_LEN);
        p = writeVarint(buf, p, sizes.get(f[2])!);
        p = writeFields(buf, p, f[2], sizes);
        break;
    }
  }
  return p;
}

/** The bytes of a message given as fields, in their order. */
export function encodeMessage(fields: readonly ProtoField[]): Buffer {
  const sizes = new Map<readonly ProtoField[], number>();
  const buf = Buffer.allocUnsafe(messageSize(fields, sizes));
  writeFields(buf, 0, fields, sizes);
  return buf;
}
