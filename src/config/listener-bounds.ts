import type { OptionSpec } from './option-spec.js';
import type { Reader } from './reader.js';

// What each listener admits: how many connections at once, and how long a client may take to send
// a request. A flood on one port must not take the descriptors the decision path needs.

/**
 * Connections at once per listener. The webhook and admin ports are reachable from outside the
 * pod: with a 1,024-descriptor limit their caps leave room for the service's pool (64), the
 * passthrough's (16), the app's (up to 128 per origin), Redis and files. The decision listener is
 * the app's own (loopback): its cap is the app's to size, and it is sized for busy apps.
 */
export const DEFAULT_MAX_CONNECTIONS = 1024;
export const DEFAULT_WEBHOOK_MAX_CONNECTIONS = 256;
export const DEFAULT_ADMIN_MAX_CONNECTIONS = 32;

/** The loopback names the decision listener always accepts in `Host` (with any port). */
export const LOOPBACK_HOSTS = ['localhost', '127.0.0.1', '[::1]'] as const;

/** One listener's bounds. */
export interface ListenerBounds {
  readonly maxConnections: number;
  /** Time a client has to send the request line and headers (ms). */
  readonly headersTimeoutMs: number;
  /** Time a client has to send the whole request, body included (ms). */
  readonly requestTimeoutMs: number;
  /** An idle kept-alive connection is closed after this (ms). */
  readonly keepAliveTimeoutMs: number;
}

export interface ListenersBoundsConfig {
  readonly decision: ListenerBounds;
  readonly webhook: ListenerBounds;
  readonly admin: ListenerBounds;
  /** `Host` names (lower case, without port) the decision listener accepts beside the loopback ones. */
  readonly allowedHosts: readonly string[];
}

export const LISTENER_BOUNDS_OPTIONS: readonly OptionSpec[] = [
  {
    name: 'max-connections',
    arg: '<n>',
    description: 'connections at once on the decision listener; beyond, new ones are closed (counted)',
    defaultText: String(DEFAULT_MAX_CONNECTIONS),
  },
  {
    name: 'webhook-max-connections',
    arg: '<n>',
    description: 'connections at once on the webhook listener; beyond, new ones are closed (counted)',
    defaultText: String(DEFAULT_WEBHOOK_MAX_CONNECTIONS),
  },
  {
    name: 'admin-max-connections',
    arg: '<n>',
    description: 'connections at once on the admin listener; beyond, new ones are closed (counted)',
    defaultText: String(DEFAULT_ADMIN_MAX_CONNECTIONS),
  },
  {
    name: 'allowed-host',
    arg: '<name>',
    description: 'a Host name the decision listener accepts beside localhost, 127.0.0.1 and [::1] (repeatable)',
    repeatable: true,
  },
];

/** A `Host` name as `--allowed-host` takes it: a DNS name or an address, no port, no scheme. */
const HOST_NAME = /^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$|^\[[0-9a-f:.]+\]$/;

/**
 * The listeners' bounds. The webhook port faces the internet: seconds for the headers and the
 * whole request (its body has `--webhook-body-timeout-ms` on top of the headers'); the decision and
 * admin ports are in the pod, but a dripped body is still cut.
 */
export function readListenerBounds(r: Reader, webhookBodyTimeoutMs: number): ListenersBoundsConfig {
  const decision = r.int('max-connections', DEFAULT_MAX_CONNECTIONS, 1, 1_000_000);
  const webhook = r.int('webhook-max-connections', DEFAULT_WEBHOOK_MAX_CONNECTIONS, 1, 1_000_000);
  const admin = r.int('admin-max-connections', DEFAULT_ADMIN_MAX_CONNECTIONS, 1, 1_000_000);
  const raw = r.list('allowed-host');
  const allowedHosts: string[] = [];
  for (const v of raw?.values ?? []) {
    const name = v.trim().toLowerCase();
    if (!HOST_NAME.test(name)) r.problem(raw!.label, `must be a host name or an address in brackets, without port or scheme, got "${v}"`);
    else allowedHosts.push(name);
  }
  return Object.freeze({
    decision: Object.freeze({ maxConnections: decision, headersTimeoutMs: 10_000, requestTimeoutMs: 30_000, keepAliveTimeoutMs: 65_000 }),
    webhook: Object.freeze({ maxConnections: webhook, headersTimeoutMs: 10_000, requestTimeoutMs: 10_000 + webhookBodyTimeoutMs, keepAliveTimeoutMs: 5_000 }),
    admin: Object.freeze({ maxConnections: admin, headersTimeoutMs: 5_000, requestTimeoutMs: 10_000, keepAliveTimeoutMs: 5_000 }),
    allowedHosts: Object.freeze(allowedHosts),
  });
}
