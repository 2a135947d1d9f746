import { credentials, makeGenericClientConstructor, Metadata, status as GrpcStatus, type Client, type ServiceError } from '@grpc/grpc-js';
import { CONFIG_KEY_EXTENSION } from './check-request.js';
import { AUTHORIZATION_SERVICE } from './listener.js';
import { encodeMessage, ProtoReader, WIRE_I64, WIRE_LEN, WIRE_VARINT, WireError, type ProtoField } from './wire.js';

// Field numbers (src/grpc/proto): what Envoy sends, and what the sidecar answers.
const CHECK_REQUEST_ATTRIBUTES = 1;
const ATTRIBUTES_REQUEST = 4;
const ATTRIBUTES_CONTEXT_EXTENSIONS = 10;
const REQUEST_HTTP = 2;
const HTTP_METHOD = 2;
const HTTP_HEADERS = 3;
const HTTP_PATH = 4;
const HTTP_PROTOCOL = 10;
const RESPONSE_STATUS = 1;
const RESPONSE_DENIED = 2;
const RESPONSE_OK = 3;
const RESPONSE_DYNAMIC_METADATA = 4;
const STATUS_CODE = 1;
const DENIED_STATUS = 1;
const HEADERS = 2;
const OPTION_HEADER = 1;
const KEY = 1;
const VALUE = 2;
const STRUCT_FIELDS = 1;
const VALUE_NUMBER = 2;
const VALUE_STRING = 3;

/** A CheckResponse as read: every header as sent (a name given twice keeps both values). */
export interface GrpcCheckAnswer {
  /** `status.code` (google.rpc.Code; absent is 0, OK). */
  readonly code: number;
  /** `ok_response` or `denied_response`, or neither. */
  readonly response: 'ok' | 'denied' | 'none';
  /** The denied response's HTTP status, 0 without one. */
  readonly httpStatus: number;
  /** Headers of the ok or denied response, each name with its values in order. */
  readonly headers: ReadonlyMap<string, readonly string[]>;
  /** `dynamic_metadata`, its string and number values. */
  readonly metadata: Readonly<Record<string, string | number>>;
}

/** No answer: the call itself failed (the listener not there, the deadline, a transport error). */
export interface GrpcCheckFailure {
  readonly failed: true;
  /** The gRPC status name (`UNAVAILABLE`, `DEADLINE_EXCEEDED`, …). */
  readonly status: string;
  readonly details: string;
}

/** `127.0.0.1:7703`, `[::1]:7703` or `unix:/path`: a grpc-js target. */
export interface GrpcCheckOptions {
  readonly target: string;
  /** The request header carrying the user reference (`--forward-auth-user-header`). */
  readonly userHeader: string;
  readonly userReference: string;
  readonly configKey: string;
  readonly timeoutMs: number;
}

/**
 * The CheckRequest Envoy's ext_authz filter sends for a request carrying the user header, with the
 * route's `context_extensions["configKey"]`.
 */
export function envoyCheckRequest(o: Pick<GrpcCheckOptions, 'userHeader' | 'userReference' | 'configKey'>): Buffer {
  const http: ProtoField[] = [
    [HTTP_METHOD, 's', 'GET'],
    [HTTP_HEADERS, 'm', [[KEY, 's', o.userHeader.toLowerCase()], [VALUE, 's', o.userReference]]],
    [HTTP_PATH, 's', '/'],
    [HTTP_PROTOCOL, 's', 'HTTP/1.1'],
  ];
  return encodeMessage([
    [
      CHECK_REQUEST_ATTRIBUTES,
      'm',
      [
        [ATTRIBUTES_REQUEST, 'm', [[REQUEST_HTTP, 'm', http]]],
        [ATTRIBUTES_CONTEXT_EXTENSIONS, 'm', [[KEY, 's', CONFIG_KEY_EXTENSION], [VALUE, 's', o.configKey]]],
      ],
    ],
  ]);
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
const text = (r: ProtoReader): string => {
  const [start, end] = r.span();
  return utf8.decode(r.buf.subarray(start, end));
};

/** Each field of the message in `[start, end)`, its tag and a reader positioned on its value. */
function* fields(buf: Uint8Array, start: number, end: number): Generator<[number, ProtoReader]> {
  const r = new ProtoReader(buf, start, end);
  while (!r.done) {
    const tag = r.tag();
    yield [tag, r];
  }
}

/** A length-delimited field's bounds (its wire type checked). */
function lenOf(tag: number, r: ProtoReader): [number, number] {
  if ((tag & 7) !== WIRE_LEN) throw new WireError(`field ${tag >>> 3} is not length-delimited`);
  return r.span();
}

function readHeaders(buf: Uint8Array, [start, end]: [number, number], into: Map<string, string[]>): void {
  for (const [tag, r] of fields(buf, start, end)) {
    if (tag >>> 3 !== OPTION_HEADER) {
      r.skip(tag & 7);
      continue;
    }
    const [hs, he] = lenOf(tag, r);
    let key = '';
    let value = '';
    for (const [t, h] of fields(buf, hs, he)) {
      if (t >>> 3 === KEY && (t & 7) === WIRE_LEN) key = text(h);
      else if (t >>> 3 === VALUE && (t & 7) === WIRE_LEN) value = text(h);
      else h.skip(t & 7);
    }
    into.set(key, [...(into.get(key) ?? []), value]);
  }
}

/** Reads a CheckResponse. @throws WireError for bytes that are not one. */
export function readCheckResponse(buf: Uint8Array): GrpcCheckAnswer {
  let code = 0;
  let response: GrpcCheckAnswer['response'] = 'none';
  let httpStatus = 0;
  const headers = new Map<string, string[]>();
  const metadata: Record<string, string | number> = {};
  for (const [tag, r] of fields(buf, 0, buf.length)) {
    const field = tag >>> 3;
    if (field === RESPONSE_STATUS) {
      const [s, e] = lenOf(tag, r);
      for (const [t, f] of fields(buf, s, e)) {
        if (t >>> 3 === STATUS_CODE && (t & 7) === WIRE_VARINT) code = f.varint();
        else f.skip(t & 7);
      }
    } else if (field === RESPONSE_DENIED || field === RESPONSE_OK) {
      if (response !== 'none') throw new WireError('both an ok and a denied response');
      response = field === RESPONSE_OK ? 'ok' : 'denied';
      const [s, e] = lenOf(tag, r);
      for (const [t, f] of fields(buf, s, e)) {
        if (t >>> 3 === HEADERS && (t & 7) === WIRE_LEN) readHeaders(buf, f.span(), headers);
        else if (field === RESPONSE_DENIED && t >>> 3 === DENIED_STATUS && (t & 7) === WIRE_LEN) {
          const [hs, he] = f.span();
          for (const [ht, h] of fields(buf, hs, he)) {
            if (ht >>> 3 === 1 && (ht & 7) === WIRE_VARINT) httpStatus = h.varint();
            else h.skip(ht & 7);
          }
        } else f.skip(t & 7);
      }
    } else if (field === RESPONSE_DYNAMIC_METADATA) {
      const [s, e] = lenOf(tag, r);
      for (const [t, f] of fields(buf, s, e)) {
        if (t >>> 3 !== STRUCT_FIELDS || (t & 7) !== WIRE_LEN) {
          f.skip(t & 7);
          continue;
        }
        const [es, ee] = f.span();
        let key = '';
        let value: string | number | undefined;
        for (const [et, ef] of fields(buf, es, ee)) {
          if (et >>> 3 === KEY && (et & 7) === WIRE_LEN) key = text(ef);
          else if (et >>> 3 === VALUE && (et & 7) === WIRE_LEN) {
            const [vs, ve] = ef.span();
            for (const [vt, vf] of fields(buf, vs, ve)) {
              if (vt >>> 3 === VALUE_NUMBER && (vt & 7) === WIRE_I64) {
                vf.skip(WIRE_I64);
                value = Buffer.from(buf.buffer, buf.byteOffset + vf.pos - 8, 8).readDoubleLE(0);
              } else if (vt >>> 3 === VALUE_STRING && (vt & 7) === WIRE_LEN) value = text(vf);
              else vf.skip(vt & 7);
            }
          } else ef.skip(et & 7);
        }
        if (value !== undefined) metadata[key] = value;
      }
    } else r.skip(tag & 7);
  }
  return { code, response, httpStatus, headers, metadata };
}

type RawAuthorization = Client & { Check(req: Buffer, metadata: Metadata, options: { deadline: number }, cb: (err: ServiceError | null, res?: Buffer) => void): unknown };

/**
 * One `envoy.service.auth.v3.Authorization/Check` on the sidecar's gRPC listener, as Envoy makes it
 * (plaintext HTTP/2, the user header, `context_extensions["configKey"]`), under one deadline.
 * Resolves with the answer read, or the call's failure; never rejects.
 */
export function checkOverGrpc(o: GrpcCheckOptions): Promise<GrpcCheckAnswer | GrpcCheckFailure> {
  const Authorization = makeGenericClientConstructor(AUTHORIZATION_SERVICE, 'Authorization') as unknown as new (target: string, creds: ReturnType<typeof credentials.createInsecure>) => RawAuthorization;
  const client = new Authorization(o.target, credentials.createInsecure());
  return new Promise<GrpcCheckAnswer | GrpcCheckFailure>((resolve) => {
    client.Check(envoyCheckRequest(o), new Metadata(), { deadline: Date.now() + o.timeoutMs }, (err, res) => {
      if (err || !res) {
        resolve({ failed: true, status: GrpcStatus[err?.code ?? GrpcStatus.UNKNOWN] ?? String(err?.code), details: err?.details ?? 'no message' });
        return;
      }
      try {
        resolve(readCheckResponse(res));
      } catch (e) {
        resolve({ failed: true, status: 'INVALID_RESPONSE', details: e instanceof Error ? e.message : String(e) });
      }
    });
  }).finally(() => client.close());
}
