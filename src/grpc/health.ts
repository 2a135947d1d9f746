import type { Readiness } from '../observability/index.js';
import { STATUS, type GrpcCall, type UnaryMethod } from './server-call.js';
import { ProtoReader, utf8At, WIRE_LEN } from './wire.js';

/** Largest HealthCheckRequest read (bytes): a service name. */
const MAX_HEALTH_REQUEST_BYTES = 4096;

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
  private readonly watches = new Map<GrpcCall, boolean>();
  private readonly unsubscribe: () => void;

  constructor(private readonly readiness: Readiness) {
    this.unsubscribe = readiness.onChange(() => {
      for (const [call, known] of this.watches) if (known) call.write(this.current());
    });
  }

  private current(): Buffer {
    return this.readiness.ready ? SERVING : NOT_SERVING;
  }

  readonly check: UnaryMethod = {
    maxBytes: MAX_HEALTH_REQUEST_BYTES,
    request: (message, call) => {
      const name = serviceName(message);
      if (name === null || !HEALTH_SERVICE_NAMES.includes(name)) call.fail(STATUS.NOT_FOUND, 'unknown service');
      else call.send(this.current());
    },
    refused: (why, call) => call.fail(why.problem === 'overload' ? STATUS.UNAVAILABLE : STATUS.INVALID_ARGUMENT, why.detail),
  };

  readonly watch: UnaryMethod = {
    maxBytes: MAX_HEALTH_REQUEST_BYTES,
    request: (message, call) => {
      const name = serviceName(message);
      // The protocol: an unknown service is SERVICE_UNKNOWN, and the call stays open all the same.
      const known = name !== null && HEALTH_SERVICE_NAMES.includes(name);
      this.watches.set(call, known);
      call.onClose = () => void this.watches.delete(call);
      call.open();
      call.write(known ? this.current() : SERVICE_UNKNOWN);
    },
    refused: (why, call) => call.fail(why.problem === 'overload' ? STATUS.UNAVAILABLE : STATUS.INVALID_ARGUMENT, why.detail),
  };

  /**
   * Ends the Watches on one connection (status OK), so a connection let go (GOAWAY) closes now
   * rather than when its Watches would: a Watch never makes a connection busy.
   */
  endWatchesOn(session: unknown): void {
    for (const call of this.watches.keys()) {
      if (call.stream.session !== session) continue;
      this.watches.delete(call);
      call.end();
    }
  }

  /** Ends every Watch (status OK, after the last status written), so a drain does not wait for them. */
  endWatches(): void {
    this.unsubscribe();
    for (const call of this.watches.keys()) call.end();
    this.watches.clear();
  }
}
