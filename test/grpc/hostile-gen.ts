import fc from 'fast-check';
import { CheckRequestType } from '../helpers/grpc.js';

/**
 * Hostile CheckRequests for the fail-closed properties: structured ones (headers and header_map
 * entries under spellings of the names the sidecar reads, values that are near misses, huge, odd
 * Unicode or not UTF-8, extensions, several copies of the message merged on the wire, unknown
 * fields), and bytes that are not a CheckRequest at all (random, or a valid one cut or flipped).
 */

export const USER = 'alice';
export const ALLOWED_KEY = 'k-allowed';

/** One place a value sits in the message, as the generator put it there. */
export interface Part {
  readonly headers: Record<string, string> | undefined;
  readonly headerMap: { key: string; value?: string; raw?: Uint8Array }[] | undefined;
  readonly extensions: Record<string, string> | undefined;
  readonly attributes: boolean;
}

export interface Hostile {
  readonly parts: readonly Part[];
  /** Unknown fields added: at the top level, and inside the attributes. */
  readonly unknownTop: Uint8Array | null;
  readonly unknownInAttributes: Uint8Array | null;
}

const userNames = fc.constantFrom('x-user-reference', 'X-User-Reference', 'x-user-reference ', 'x-user-referencE', 'x-user', 'user');
const keyNames = fc.constantFrom('x-consent-config-key', 'X-Consent-Config-Key', 'x-consent-config-key2');
const values = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(USER, ALLOWED_KEY, 'mallory', 'k-other', '', ' alice', 'alice\u0000', 'a\u030alice', 'ALICE', `${USER},mallory`) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  { weight: 1, arbitrary: fc.integer({ min: 1000, max: 20_000 }).map((n) => 'a'.repeat(n)) },
);
const notUtf8 = fc.constantFrom(Uint8Array.from([0x61, 0x6c, 0x69, 0x63, 0x65, 0xff]), Uint8Array.from([0xc3, 0x28]), Uint8Array.from([0xed, 0xa0, 0x80]));
const rawValues = fc.oneof(values.map((v) => new Uint8Array(Buffer.from(v, 'utf8'))), notUtf8);

const part: fc.Arbitrary<Part> = fc.record({
  headers: fc.option(fc.dictionary(fc.oneof(userNames, keyNames, fc.string({ maxLength: 12 })), values, { maxKeys: 5 }), { nil: undefined }),
  headerMap: fc.option(
    fc.array(
      fc.record({ key: fc.oneof(userNames, keyNames, fc.string({ maxLength: 12 })), value: fc.option(values, { nil: undefined }), raw: fc.option(rawValues, { nil: undefined }) }),
      { maxLength: 4 },
    ),
    { nil: undefined },
  ),
  extensions: fc.option(fc.dictionary(fc.constantFrom('configKey', 'configkey', 'other'), values, { maxKeys: 2 }), { nil: undefined }),
  attributes: fc.boolean(),
});

/** The allowed request, plainly: the generator builds on it so that the allowed side is reached too. */
const ALLOWED_PART: Part = { headers: { 'x-user-reference': USER }, headerMap: undefined, extensions: { configKey: ALLOWED_KEY }, attributes: true };

const unknownFields = {
  unknownTop: fc.option(fc.uint8Array({ maxLength: 64 }), { nil: null }),
  unknownInAttributes: fc.option(fc.uint8Array({ maxLength: 64 }), { nil: null }),
};

/** Anything, or the allowed request with hostile parts merged into it (before or after). */
export const hostile: fc.Arbitrary<Hostile> = fc.oneof(
  fc.record({ parts: fc.array(part, { minLength: 1, maxLength: 3 }), ...unknownFields }),
  fc.record({
    parts: fc.tuple(fc.array(part, { maxLength: 2 }), fc.boolean()).map(([extra, first]) => (first ? [ALLOWED_PART, ...extra] : [...extra, ALLOWED_PART])),
    ...unknownFields,
  }),
);

/** A length-delimited field of `field` holding `bytes`. */
export function lenField(field: number, bytes: Uint8Array): Buffer {
  const varint = (n: number): number[] => {
    const out: number[] = [];
    for (let v = n; ; v = Math.floor(v / 128)) {
      if (v < 0x80) {
        out.push(v);
        return out;
      }
      out.push((v % 128) | 0x80);
    }
  };
  return Buffer.concat([Buffer.from(varint(field * 8 + 2)), Buffer.from(varint(bytes.length)), Buffer.from(bytes)]);
}

/** The bytes of a hostile request: each part encoded as a CheckRequest, concatenated (protobuf merges them). */
export function encodeHostile(h: Hostile): Buffer {
  const T = CheckRequestType();
  const chunks: Buffer[] = h.parts.map((p): Buffer => {
    if (!p.attributes) return Buffer.alloc(0);
    const http: Record<string, unknown> = { method: 'GET', path: '/' };
    if (p.headers) http.headers = p.headers;
    if (p.headerMap) http.header_map = { headers: p.headerMap.map((e) => ({ key: e.key, ...(e.value !== undefined ? { value: e.value } : {}), ...(e.raw !== undefined ? { raw_value: e.raw } : {}) })) };
    return Buffer.from(T.encode(T.fromObject({ attributes: { request: { http }, ...(p.extensions ? { context_extensions: p.extensions } : {}) } })).finish());
  });
  if (h.unknownInAttributes) chunks.push(lenField(1, lenField(77, h.unknownInAttributes)));
  if (h.unknownTop) chunks.push(lenField(99, h.unknownTop));
  return Buffer.concat(chunks);
}

const lower = (s: string): string => s.replace(/[A-Z]/g, (c) => c.toLowerCase());

/** Every value the message gives for the user header and for the configKey, across all parts. */
export function occurrences(h: Hostile): { users: (string | null)[]; keys: (string | null)[] } {
  const users: (string | null)[] = [];
  const keys: (string | null)[] = [];
  const text = (e: { value?: string; raw?: Uint8Array }): string | null => {
    if (e.raw !== undefined && e.raw.length > 0) {
      try {
        return new TextDecoder('utf-8', { fatal: true }).decode(e.raw);
      } catch {
        return null;
      }
    }
    return e.value ?? '';
  };
  for (const p of h.parts) {
    if (!p.attributes) continue;
    for (const [k, v] of Object.entries(p.headers ?? {})) {
      if (lower(k) === 'x-user-reference') users.push(v);
      if (lower(k) === 'x-consent-config-key') keys.push(v);
    }
    for (const e of p.headerMap ?? []) {
      if (lower(e.key) === 'x-user-reference') users.push(text(e));
      if (lower(e.key) === 'x-consent-config-key') keys.push(text(e));
    }
    if (p.extensions && 'configKey' in p.extensions) keys.push(p.extensions.configKey!);
  }
  return { users, keys };
}

/** Raw bytes, or a valid ALLOW-shaped request cut short or with one byte changed. */
export const notAMessage: fc.Arbitrary<Buffer> = fc.oneof(
  fc.uint8Array({ maxLength: 512 }).map((b) => Buffer.from(b)),
  fc.tuple(fc.nat(), fc.nat(255), fc.boolean()).map(([at, byte, cut]) => {
    const T = CheckRequestType();
    const valid = Buffer.from(T.encode(T.fromObject({ attributes: { request: { http: { headers: { 'x-user-reference': USER } } }, context_extensions: { configKey: ALLOWED_KEY } } })).finish());
    const i = at % valid.length;
    if (cut) return valid.subarray(0, i);
    const copy = Buffer.from(valid);
    copy[i] = byte;
    return copy;
  }),
);
