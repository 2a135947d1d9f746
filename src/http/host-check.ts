import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { rejectedAnswer, type Answer } from '../decision/index.js';
import type { RouteBoundary } from '../edge/decision-boundary.js';
import type { Handler } from './route-table.js';

const IPV4_LOOPBACK = /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/;

/** The name of a `Host` value, lower case, without its port (`[::1]:7700` → `[::1]`). */
export function hostName(value: string): string {
  const v = value.trim().toLowerCase();
  if (v.startsWith('[')) {
    const end = v.indexOf(']');
    return end === -1 ? v : v.slice(0, end + 1);
  }
  const colon = v.indexOf(':');
  return colon === -1 ? v : v.slice(0, colon);
}

/**
 * Whether a request may be served by the decision listener, by its `Host`: a loopback name
 * (`localhost`, `127.x.y.z`, `[::1]`), a name given with `--allowed-host`, or any when the listener
 * is a Unix socket (`unixSocket`: nothing resolves a name to it). A page in a browser that a
 * rebinding DNS points at 127.0.0.1 still sends its own name, and is refused. No `Host` at all
 * (HTTP/1.0) names nothing to rebind. Whether the listener is a Unix socket is its configuration,
 * not read off the request's socket: a TCP socket already destroyed has no peer port either.
 */
export function hostGuard(allowed: readonly string[], unixSocket = false): (req: IncomingMessage) => boolean {
  if (unixSocket) return () => true;
  const extra = new Set(allowed);
  // The last Host accepted, as it came: an app sends the same one every time, and the verdict is
  // a function of the value alone.
  let lastAccepted: string | undefined;
  return (req) => {
    const raw = req.rawHeaders;
    let host: string | undefined;
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i]!;
      if (name.length === 4 && name.toLowerCase() === 'host') {
        // Two Host fields are a malformed request (RFC 9112 §3.2): refused.
        if (host !== undefined) return false;
        host = raw[i + 1]!;
      }
    }
    if (host === undefined || host === lastAccepted) return true;
    const n = hostName(host);
    const ok = n === 'localhost' || n === '[::1]' || IPV4_LOOPBACK.test(n) || extra.has(n);
    if (ok) lastAccepted = host;
    return ok;
  };
}

/** `handle`, served only when the request's `Host` passes `allowed`; else 400 `field: "host"` through `answers`. */
export function hostChecked(handle: Handler, allowed: (req: IncomingMessage) => boolean, answers: RouteBoundary<ServerResponse>): Handler {
  return (req, res) => {
    if (allowed(req)) return handle(req, res);
    req.resume();
    answers.answer(res, HOST_REFUSED, performance.now(), undefined, null);
  };
}

const HOST_REFUSED: Answer = rejectedAnswer({
  field: 'host',
  detail: 'the Host is not a loopback name (localhost, 127.0.0.1, [::1]) nor one given with --allowed-host',
});
