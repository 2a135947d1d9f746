import { locateDuplicateMember, type DuplicateMember } from '../lib/duplicate-member.js';
import type { CheckRequest } from './types.js';

/** Why a request was refused before the service was asked. `field` names what is wrong. */
export interface InvalidRequest {
  readonly field: 'body' | 'userReference' | 'configKey' | 'path' | 'method' | 'request' | 'host';
  readonly detail: string;
  /** A stable code of what is wrong, where the field alone does not say (a refused path). */
  readonly problem?: string;
}

/** Longest accepted `userReference` / `configKey`, in UTF-16 units. */
export const MAX_FIELD_LENGTH = 1024;

/**
 * Validates the app's request body. Only the two documented fields are kept and forwarded, so
 * the cache key (both fields) is the whole request.
 */
export function parseCheckRequest(body: string): CheckRequest | InvalidRequest {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return { field: 'body', detail: 'body is not valid JSON' };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { field: 'body', detail: 'body must be a JSON object' };
  }
  // JSON.parse keeps the last of repeated members: `{"configKey":"a","configKey":"b"}` would be
  // asked as "b" by us and read as "a" by a parser that keeps the first. An ambiguous request is
  // refused, as an ambiguous answer of the service is no decision.
  const duplicate = locateDuplicateMember(body);
  if (duplicate !== undefined) return duplicateMember(duplicate);
  const { userReference, configKey } = value as Record<string, unknown>;
  const bad = checkField('userReference', userReference) ?? checkField('configKey', configKey);
  if (bad) return bad;
  return { userReference: userReference as string, configKey: configKey as string };
}

/** 400 for a member named twice: the field itself when it is one of the request's, else the body. */
function duplicateMember({ name, path }: DuplicateMember): InvalidRequest {
  const field = path.length === 0 && (name === 'userReference' || name === 'configKey') ? name : 'body';
  return { field, detail: `member "${name.slice(0, 64)}" appears more than once${path.length === 0 ? '' : ' in one object'}; the request is ambiguous` };
}

/**
 * The check body as raw bytes: read straight from them when it has the one shape clients send
 * (below), else decoded as UTF-8 and parsed ({@link parseCheckRequest}). Either way the same
 * answer for the same bytes: the fast read takes only bodies where JSON.parse could not differ.
 */
export function parseCheckBody(body: Buffer): CheckRequest | InvalidRequest {
  return readCompactBody(body) ?? parseCheckRequest(body.toString('utf8'));
}

const USER_FIRST = Buffer.from('{"userReference":"');
const CONFIG_SECOND = Buffer.from('","configKey":"');
const CONFIG_FIRST = Buffer.from('{"configKey":"');
const USER_SECOND = Buffer.from('","userReference":"');

/**
 * `{"userReference":"…","configKey":"…"}` (or the keys the other way round): no whitespace, each
 * string printable ASCII without a quote or a backslash, nothing after the `}`. Such a string is
 * its own JSON text (no escape, no byte to decode), so its bytes are what JSON.parse would return.
 * Anything else (a space, an escape, non-ASCII, another key, a repeated one) is left to JSON.parse:
 * undefined. Skips the UTF-8 decoding and the parser's object on the cache-hit path
 * (docs/design.md, Where a cache hit spends its time).
 */
export function readCompactBody(b: Buffer): CheckRequest | InvalidRequest | undefined {
  const userFirst = startsWithAt(b, USER_FIRST, 0);
  if (!userFirst && !startsWithAt(b, CONFIG_FIRST, 0)) return undefined;
  const start1 = userFirst ? USER_FIRST.length : CONFIG_FIRST.length;
  const end1 = plainStringEnd(b, start1);
  const middle = userFirst ? CONFIG_SECOND : USER_SECOND;
  if (end1 === -1 || !startsWithAt(b, middle, end1)) return undefined;
  const start2 = end1 + middle.length;
  const end2 = plainStringEnd(b, start2);
  if (end2 === -1 || end2 !== b.length - 2 || b[end2 + 1] !== 0x7d /* } */) return undefined;
  const userLength = userFirst ? end1 - start1 : end2 - start2;
  const configLength = userFirst ? end2 - start2 : end1 - start1;
  const key = userFirst ? keyFromBytes(b, start1, end1, start2, end2) : keyFromBytes(b, start2, end2, start1, end1);
  // The key is `<digits>:<user><config>`: the fields are its last userLength + configLength characters.
  const userReference = key.slice(key.length - configLength - userLength, key.length - configLength);
  const configKey = key.slice(key.length - configLength);
  const bad = checkField('userReference', userReference) ?? checkField('configKey', configKey);
  if (bad) return bad;
  const req = { userReference, configKey };
  lastRead = req;
  lastKey = key;
  return req;
}

/** The request the compact read made last, and its cache key (see {@link keyMadeWith}). */
let lastRead: CheckRequest | undefined;
let lastKey = '';
/** Where keys are laid out; `latin1Slice` is Buffer's own decoder, without `toString`'s argument checks. */
type Latin1Buffer = Buffer & { latin1Slice(start: number, end: number): string };
const KEY_BYTES = Buffer.allocUnsafe(4096) as Latin1Buffer;

/**
 * allow-cache's `cacheKey` of the fields at these byte ranges (`<user length>:<user><config>`),
 * decoded once from bytes laid out in that order: a flat string, where concatenating the decoded
 * fields makes a rope the cache's map must flatten and hash. The fields are slices of it.
 */
function keyFromBytes(b: Buffer, userStart: number, userEnd: number, configStart: number, configEnd: number): string {
  const userLength = userEnd - userStart;
  const size = userLength + configEnd - configStart + 8;
  const out = size <= KEY_BYTES.length ? KEY_BYTES : (Buffer.allocUnsafe(size) as Latin1Buffer);
  // The length's digits, then the bytes, by hand: no number-to-string, no Buffer call per part.
  let o = 0;
  let p = 1;
  while (p * 10 <= userLength) p *= 10;
  for (; p >= 1; p /= 10) out[o++] = 0x30 + (Math.floor(userLength / p) % 10);
  out[o++] = 0x3a; /* : */
  for (let i = userStart; i < userEnd; i++) out[o++] = b[i]!;
  for (let i = configStart; i < configEnd; i++) out[o++] = b[i]!;
  return out.latin1Slice(0, o);
}

/**
 * The cache key of `req` when the compact read made `req` just now, from its bytes; undefined for
 * any other request (made by JSON.parse, or read before the last one). A key is only ever handed
 * back for the very object it was made with, whose fields are slices of it.
 */
export function keyMadeWith(req: CheckRequest): string | undefined {
  return req === lastRead ? lastKey : undefined;
}

function startsWithAt(b: Buffer, prefix: Buffer, at: number): boolean {
  if (b.length - at < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (b[at + i] !== prefix[i]) return false;
  return true;
}

/** Index of the `"` closing a string opened before `from`; -1 when a control character, a backslash, DEL or a non-ASCII byte comes first, or no quote does. */
function plainStringEnd(b: Buffer, from: number): number {
  for (let i = from; i < b.length; i++) {
    const c = b[i]!;
    if (c === 0x22 /* " */) return i;
    if (c < 0x20 || c > 0x7e || c === 0x5c /* \ */) return -1;
  }
  return -1;
}

function checkField(field: 'userReference' | 'configKey', value: unknown): InvalidRequest | undefined {
  if (typeof value !== 'string') {
    return { field, detail: `${field} must be a string${value === undefined ? ' and is missing' : ''}` };
  }
  if (value.length === 0) return { field, detail: `${field} must not be empty` };
  if (value.length > MAX_FIELD_LENGTH) return { field, detail: `${field} is longer than ${MAX_FIELD_LENGTH} characters` };
  return undefined;
}

export function isInvalidRequest(r: CheckRequest | InvalidRequest): r is InvalidRequest {
  return 'field' in r;
}
