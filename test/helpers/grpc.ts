import { fileURLToPath } from 'node:url';
import { credentials, loadPackageDefinition, makeGenericClientConstructor, Metadata, type Client, type ServiceError } from '@grpc/grpc-js';
import { loadSync, type PackageDefinition } from '@grpc/proto-loader';
import protobuf from 'protobufjs';

/** The sidecar's own .proto files (what ships in dist/grpc/proto), read by protobufjs here, never by the server. */
export const PROTO_DIR = fileURLToPath(new URL('../../src/grpc/proto/', import.meta.url));
export const PROTO_FILES = ['envoy/service/auth/v3/external_auth.proto', 'grpc/health/v1/health.proto'];

const LOAD_OPTIONS = { keepCase: true, longs: String, enums: String, defaults: false, oneofs: true, includeDirs: [PROTO_DIR] };

let definition: PackageDefinition | undefined;
/** The package definition of the sidecar's protos, as a client built from them sees it. */
export function protoDefinition(): PackageDefinition {
  return (definition ??= loadSync(PROTO_FILES, LOAD_OPTIONS));
}

let root: protobuf.Root | undefined;
/** The protobufjs root of the same files: encode and decode messages by hand. */
export function protoRoot(): protobuf.Root {
  if (root) return root;
  const r = new protobuf.Root();
  r.resolvePath = (_origin, target) => (target.startsWith('google/protobuf/') ? target : `${PROTO_DIR}${target}`);
  root = r.loadSync(PROTO_FILES, { keepCase: true });
  return root;
}

export const CheckRequestType = (): protobuf.Type => protoRoot().lookupType('envoy.service.auth.v3.CheckRequest');
export const CheckResponseType = (): protobuf.Type => protoRoot().lookupType('envoy.service.auth.v3.CheckResponse');

/** A CheckResponse as the proto-loader client gives it (keepCase, enums as names). */
export interface CheckResponse {
  status?: { code?: number; message?: string };
  denied_response?: { status?: { code?: string }; headers?: { header?: { key: string; value: string }; append_action?: string }[]; body?: string };
  ok_response?: { headers?: { header?: { key: string; value: string }; append_action?: string }[] };
  dynamic_metadata?: { fields?: Record<string, { string_value?: string; number_value?: number; stringValue?: string; numberValue?: number }> };
  http_response?: string;
}

/** The HTTP headers of a CheckRequest, by name (the `headers` map). */
export type Headers = Record<string, string>;

/** A plain CheckRequest: headers in the `headers` map, context extensions as given. */
export function checkRequest(headers: Headers, contextExtensions: Record<string, string> = {}): Record<string, unknown> {
  return {
    attributes: {
      source: { principal: 'spiffe://cluster.local/ns/shop/sa/frontend' },
      request: { time: { seconds: 1_700_000_000, nanos: 0 }, http: { id: 'req-1', method: 'GET', path: '/orders', host: 'shop.example', scheme: 'https', protocol: 'HTTP/1.1', size: -1, headers } },
      context_extensions: contextExtensions,
    },
  };
}

type Unary<Req> = (req: Req, metadata: Metadata, options: { deadline?: number }, cb: (err: ServiceError | null, res?: unknown) => void) => { cancel(): void };

/** A grpc-js client of the sidecar's gRPC listener (`target`: `127.0.0.1:port` or `unix:/path`), built from the .proto files. */
export class GrpcClient {
  readonly authz: Client & { Check: Unary<unknown> };
  readonly health: Client & { Check: Unary<unknown>; Watch: (req: unknown) => NodeJS.EventEmitter & { cancel(): void } };
  readonly raw: Client & { Check: Unary<Buffer> };

  constructor(readonly target: string) {
    const pkg = loadPackageDefinition(protoDefinition()) as unknown as {
      envoy: { service: { auth: { v3: { Authorization: new (t: string, c: unknown) => GrpcClient['authz'] } } } };
      grpc: { health: { v1: { Health: new (t: string, c: unknown) => GrpcClient['health'] } } };
    };
    const creds = credentials.createInsecure();
    this.authz = new pkg.envoy.service.auth.v3.Authorization(target, creds);
    this.health = new pkg.grpc.health.v1.Health(target, creds);
    const id = (b: Buffer): Buffer => b;
    const Raw = makeGenericClientConstructor(
      { Check: { path: '/envoy.service.auth.v3.Authorization/Check', requestStream: false, responseStream: false, requestSerialize: id, requestDeserialize: id, responseSerialize: id, responseDeserialize: id, originalName: 'Check' } },
      'RawAuthorization',
    ) as unknown as new (t: string, c: unknown) => GrpcClient['raw'];
    this.raw = new Raw(target, creds);
  }

  /** One Check; resolves with the reply or the gRPC error (never rejects). */
  check(req: unknown, options: { deadline?: number } = {}): Promise<{ res?: CheckResponse; err?: ServiceError }> {
    return new Promise((resolve) => {
      this.authz.Check(req, new Metadata(), options, (err, res) => resolve(err ? { err } : { res: res as CheckResponse }));
    });
  }

  /** One Check whose message is `bytes` as they are; the reply decoded with the .proto. */
  checkRaw(bytes: Buffer): Promise<{ res?: CheckResponse; err?: ServiceError }> {
    return new Promise((resolve) => {
      this.raw.Check(bytes, new Metadata(), {}, (err, res) =>
        resolve(err ? { err } : { res: CheckResponseType().toObject(CheckResponseType().decode(res as Buffer), { enums: String, oneofs: true, defaults: false }) as CheckResponse }),
      );
    });
  }

  healthCheck(service = ''): Promise<{ status?: string; err?: ServiceError }> {
    return new Promise((resolve) => {
      this.health.Check({ service }, new Metadata(), {}, (err, res) => resolve(err ? { err } : { status: (res as { status?: string }).status ?? 'UNKNOWN' }));
    });
  }

  close(): void {
    this.authz.close();
    this.health.close();
    this.raw.close();
  }
}

/** The headers of a CheckResponse's denied or ok response, by name. */
export function headersOf(res: CheckResponse): Record<string, string> {
  const list = res.ok_response?.headers ?? res.denied_response?.headers ?? [];
  return Object.fromEntries(list.map((h) => [h.header!.key, h.header!.value]));
}

/** The dynamic metadata as plain values (protobufjs names the well-known Value's fields in camelCase). */
export function metadataOf(res: CheckResponse): Record<string, string | number> {
  return Object.fromEntries(Object.entries(res.dynamic_metadata?.fields ?? {}).map(([k, v]) => [k, v.string_value ?? v.stringValue ?? v.number_value ?? v.numberValue!]));
}
