import { MAX_FIELD_LENGTH, type CheckRequest, type InvalidRequest } from '../decision/index.js';
import { CONFIG_KEY_HEADER } from '../edge/decision-headers.js';
import { bytesEqual, bytesEqualLower, ProtoReader, utf8At, WIRE_LEN, WireError } from './wire.js';

/** The per-route context extension that names the configKey (Envoy's check_settings, Istio's and Envoy Gateway's route config). */
export const CONFIG_KEY_EXTENSION = 'configKey';

// Field numbers (envoy.service.auth.v3, envoy.config.core.v3): src/grpc/proto.
const CHECK_REQUEST_ATTRIBUTES = 1;
const ATTRIBUTES_REQUEST = 4;
const ATTRIBUTES_CONTEXT_EXTENSIONS = 10;
const REQUEST_HTTP = 2;
const HTTP_HEADERS = 3;
const HTTP_HEADER_MAP = 13;
const HEADER_MAP_HEADERS = 1;
const KEY = 1;
const VALUE = 2;
const RAW_VALUE = 3;

const ascii = (s: string): Uint8Array => Buffer.from(s, 'latin1');
const CONFIG_KEY_HEADER_BYTES = ascii(CONFIG_KEY_HEADER);
const CONFIG_KEY_EXTENSION_BYTES = ascii(CONFIG_KEY_EXTENSION);

/** A value found in the message: its text, or null when its bytes are not UTF-8. */
type Found = string | null;

/** Every place the user reference and the configKey were found, each occurrence kept. */
interface Gathered {
  readonly userInHeaders: Found[];
  readonly userInHeaderMap: Found[];
  readonly keyInHeaders: Found[];
  readonly keyInHeaderMap: Found[];
  readonly keyInExtensions: Found[];
}

/** A field the sidecar reads must be length-delimited; anything else is not the message it claims to be. */
function isLen(tag: number, field: number): boolean {
  if (tag >>> 3 !== field) return false;
  if ((tag & 7) !== WIRE_LEN) throw new WireError(`field ${field} has wire type ${tag & 7}`);
  return true;
}

/**
 * One `{key, value, raw_value}` entry (a map entry or a HeaderValue): the bounds of each, where a
 * field given twice is ambiguous (a reader keeping the last could disagree with one keeping the
 * first) and refused.
 */
function entry(buf: Uint8Array, start: number, end: number, withRaw: boolean): { key: [number, number] | null; value: [number, number] | null; raw: [number, number] | null } {
  const out: { key: [number, number] | null; value: [number, number] | null; raw: [number, number] | null } = { key: null, value: null, raw: null };
  const r = new ProtoReader(buf, start, end);
  while (!r.done) {
    const tag = r.tag();
    const slot = isLen(tag, KEY) ? 'key' : isLen(tag, VALUE) ? 'value' : withRaw && isLen(tag, RAW_VALUE) ? 'raw' : null;
    if (slot === null) {
      r.skip(tag & 7);
      continue;
    }
    if (out[slot] !== null) throw new WireError(`an entry gives its ${slot} twice`);
    out[slot] = r.span();
  }
  return out;
}

/** The entry's value as text: `value` or `raw_value`, of which Envoy sets exactly one. */
function valueOf(buf: Uint8Array, e: ReturnType<typeof entry>): Found {
  const [vs, ve] = e.value ?? [0, 0];
  const [rs, re] = e.raw ?? [0, 0];
  if (ve > vs && re > rs) throw new WireError('a header gives both value and raw_value');
  return re > rs ? utf8At(buf, rs, re) : utf8At(buf, vs, ve);
}

function gather(buf: Uint8Array, userHeader: Uint8Array): Gathered {
  const g: Gathered = { userInHeaders: [], userInHeaderMap: [], keyInHeaders: [], keyInHeaderMap: [], keyInExtensions: [] };
  const header = (s: number, e: number, withRaw: boolean, user: Found[], key: Found[]): void => {
    const kv = entry(buf, s, e, withRaw);
    const [ks, ke] = kv.key ?? [0, 0];
    // Header names compare case-insensitively: `X-User-Reference` and `x-user-reference` are one header.
    if (bytesEqualLower(buf, ks, ke, userHeader)) user.push(valueOf(buf, kv));
    else if (bytesEqualLower(buf, ks, ke, CONFIG_KEY_HEADER_BYTES)) key.push(valueOf(buf, kv));
  };
  const headerMap = (s: number, e: number): void => {
    const r = new ProtoReader(buf, s, e);
    while (!r.done) {
      const tag = r.tag();
      if (isLen(tag, HEADER_MAP_HEADERS)) header(...r.span(), true, g.userInHeaderMap, g.keyInHeaderMap);
      else r.skip(tag & 7);
    }
  };
  const http = (s: number, e: number): void => {
    const r = new ProtoReader(buf, s, e);
    while (!r.done) {
      const tag = r.tag();
      if (isLen(tag, HTTP_HEADERS)) header(...r.span(), false, g.userInHeaders, g.keyInHeaders);
      else if (isLen(tag, HTTP_HEADER_MAP)) headerMap(...r.span());
      else r.skip(tag & 7);
    }
  };
  const request = (s: number, e: number): void => {
    const r = new ProtoReader(buf, s, e);
    while (!r.done) {
      const tag = r.tag();
      if (isLen(tag, REQUEST_HTTP)) http(...r.span());
      else r.skip(tag & 7);
    }
  };
  const attributes = (s: number, e: number): void => {
    const r = new ProtoReader(buf, s, e);
    while (!r.done) {
      const tag = r.tag();
      if (isLen(tag, ATTRIBUTES_REQUEST)) request(...r.span());
      else if (isLen(tag, ATTRIBUTES_CONTEXT_EXTENSIONS)) {
        const kv = entry(buf, ...r.span(), false);
        const [ks, ke] = kv.key ?? [0, 0];
        if (bytesEqual(buf, ks, ke, CONFIG_KEY_EXTENSION_BYTES)) g.keyInExtensions.push(valueOf(buf, kv));
      } else r.skip(tag & 7);
    }
  };
  // A message field given twice is merged (protobuf's rule): each occurrence is read, and every
  // header and extension found in any of them counts.
  const r = new ProtoReader(buf);
  while (!r.done) {
    const tag = r.tag();
    if (isLen(tag, CHECK_REQUEST_ATTRIBUTES)) attributes(...r.span());
    else r.skip(tag & 7);
  }
  return g;
}

/**
 * The one value of a header, from `headers` and `header_map` together: a header given twice in
 * either is refused (Envoy joins a repeated header into one `headers` entry and keeps one
 * `header_map` entry per line, so two entries are two headers); both forms present must agree.
 */
function headerValue(field: InvalidRequest['field'], name: string, inHeaders: Found[], inHeaderMap: Found[]): Found | undefined | InvalidRequest {
  if (inHeaders.length > 1 || inHeaderMap.length > 1) return { field, detail: `header ${name} is given more than once` };
  const all = [...inHeaders, ...inHeaderMap];
  if (all.includes(null)) return { field, detail: `header ${name} is not UTF-8` };
  if (all.length === 2 && all[0] !== all[1]) return { field, detail: `header ${name} differs between headers and header_map` };
  return all[0];
}

function checkValue(field: 'userReference' | 'configKey', where: string, value: Found | undefined): InvalidRequest | undefined {
  if (value === null) return { field, detail: `${where} is not UTF-8` };
  if (value === undefined || value === '') return { field, detail: `${field} is missing (${where})` };
  if (value.length > MAX_FIELD_LENGTH) return { field, detail: `${field} is longer than ${MAX_FIELD_LENGTH} characters` };
  return undefined;
}

const isInvalid = (x: unknown): x is InvalidRequest => typeof x === 'object' && x !== null;

/**
 * The request a CheckRequest asks about, or what is wrong with it. The user reference is the HTTP
 * header `userHeader` (lower case); the configKey is `context_extensions["configKey"]` or the
 * `x-consent-config-key` header, both given and different refused. Bytes that are not a protobuf
 * message, a message larger than `maxBytes`, a value that is not UTF-8, a header given twice: all
 * refused, never guessed at. Fields the sidecar does not read are skipped. Never throws.
 */
export function parseCheckRequestMessage(buf: Uint8Array, userHeader: string, maxBytes: number): CheckRequest | InvalidRequest {
  if (buf.length > maxBytes) return { field: 'request', detail: `the CheckRequest is larger than ${maxBytes} bytes` };
  let g: Gathered;
  try {
    g = gather(buf, ascii(userHeader));
  } catch (err) {
    return { field: 'request', detail: `not a CheckRequest (${err instanceof WireError ? err.message : 'unreadable'})` };
  }
  const user = headerValue('userReference', userHeader, g.userInHeaders, g.userInHeaderMap);
  if (isInvalid(user)) return user;
  const badUser = checkValue('userReference', `header ${userHeader}`, user);
  if (badUser) return badUser;
  if (g.keyInExtensions.length > 1) return { field: 'configKey', detail: `context_extensions ${CONFIG_KEY_EXTENSION} is given more than once` };
  const fromExtension = g.keyInExtensions[0];
  if (fromExtension === null) return { field: 'configKey', detail: `context_extensions ${CONFIG_KEY_EXTENSION} is not UTF-8` };
  const fromHeader = headerValue('configKey', CONFIG_KEY_HEADER, g.keyInHeaders, g.keyInHeaderMap);
  if (isInvalid(fromHeader)) return fromHeader;
  if (fromExtension !== undefined && fromHeader !== undefined && fromExtension !== fromHeader) {
    return { field: 'configKey', detail: `context_extensions ${CONFIG_KEY_EXTENSION} and header ${CONFIG_KEY_HEADER} differ` };
  }
  const configKey = fromExtension ?? fromHeader;
  const badKey = checkValue('configKey', `context_extensions ${CONFIG_KEY_EXTENSION} or header ${CONFIG_KEY_HEADER}`, configKey);
  if (badKey) return badKey;
  return { userReference: user as string, configKey: configKey as string };
}
