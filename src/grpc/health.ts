import type { sendUnaryData, ServerUnaryCall, ServerWritableStream } from '@grpc/grpc-js';
import { status as GrpcStatus } from '@grpc/grpc-js';
import type { Readiness } from '../observability/index.js';
import { ProtoReader, utf8At, WIRE_LEN } from './wire.js';

/** The names the health service knows: the server as a whole ("") and the ext_authz service. */
export const HEALTH_SERVICE_NAMES: readonly string[] = ['', 'envoy.service.auth.v3.Authorization'];

// grpc.health.v1.HealthCheckResponse.ServingStatus, as whole encoded messages (field 1, varint).
const SERVING = Buffer.from([0x08, 1]);
const NOT_SERVING = Buffer.from([0x08, 2]);
const SERVICE_UNKNOWN = Buffer.from([0x08, 3]);

/** The `service` of a HealthCheckRequest, or null when the bytes are not one. */
function serviceName(buf: Buffer): string | null {
  try {
    const r = new ProtoReader(buf);
    let name = '';
    while (!r.done) {
      const tag = r.tag();
      if (tag === (1 << 3 | WIRE_LEN)) {
        const s = utf8At(buf, ...r.span());
        if (s === null) return null;
        name = s;
      } else r.skip(tag & 7);
    }
    return name;
  } catch {
    return null;
  }
}

/**
 * `grpc.health.v1.Health`: SERVING while the sidecar is ready (`/readyz`), NOT_SERVING before and
 * while it drains. Check answers once (NOT_FOUND for a service it does not know, as the protocol
 * says); Watch sends the status now and on every change, until the client leaves or the listener
 * closes ({@link endWatches}).
 */
export class HealthService {
  /** Open Watch calls, each with whether it asked about a service this server knows. */
  private readonly watches = new Map<ServerWritableStream<Buffer, Buffer>, boolean>();
  private readonly unsubscribe: () => void;

  constructor(private readonly readiness: Readiness) {
    this.unsubscribe = readiness.onChange(() => {
      for (const [call, known] of this.watches) if (known) call.write(this.current());
    });
  }

  private current(): Buffer {
    return this.readiness.ready ? SERVING : NOT_SERVING;
  }

  readonly check = (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>): void => {
    const name = serviceName(call.request);
    if (name === null || !HEALTH_SERVICE_NAMES.includes(name)) {
      callback({ code: GrpcStatus.NOT_FOUND, details: 'unknown service' });
      return;
    }
    callback(null, this.current());
  };

  readonly watch = (call: ServerWritableStream<Buffer, Buffer>): void => {
    const name = serviceName(call.request);
    // The protocol: an unknown service is SERVICE_UNKNOWN, and the call stays open all the same.
    const known = name !== null && HEALTH_SERVICE_NAMES.includes(name);
    this.watches.set(call, known);
    const forget = (): void => void this.watches.delete(call);
    call.on('cancelled', forget);
    call.on('close', forget);
    call.on('error', forget);
    call.write(known ? this.current() : SERVICE_UNKNOWN);
  };

  /** Ends every Watch (status OK, after the last status written), so a drain does not wait for them. */
  endWatches(): void {
    this.unsubscribe();
    for (const call of [...this.watches.keys()]) {
      try {
        call.end();
      } catch {
        // a call already gone
      }
    }
    this.watches.clear();
  }
}
