import type { ListenAddress } from '../lib/listen-address.js';
import type { OptionSpec } from './option-spec.js';
import type { Reader } from './reader.js';

// Where the three listeners bind (contract, Processes and ports).

export const DEFAULT_DECISION_LISTEN = '127.0.0.1:7700';
export const DEFAULT_WEBHOOK_LISTEN = '0.0.0.0:7701';
export const DEFAULT_ADMIN_LISTEN = '0.0.0.0:7702';

export const LISTEN_OPTIONS: readonly OptionSpec[] = [
  {
    name: 'listen',
    arg: '<host:port|unix:/path>',
    description: 'decision API listener: host:port, or unix:/absolute/path.sock for a Unix socket the app reaches through a shared directory',
    defaultText: DEFAULT_DECISION_LISTEN,
  },
  { name: 'webhook-listen', arg: '<host:port>', description: 'webhook ingress listener', defaultText: DEFAULT_WEBHOOK_LISTEN },
  { name: 'admin-listen', arg: '<host:port>', description: 'metrics and probes listener', defaultText: DEFAULT_ADMIN_LISTEN },
];

/** Where the three listeners bind (`--listen`, `--webhook-listen`, `--admin-listen`). */
export interface ListenersConfig {
  readonly decision: ListenAddress;
  readonly webhook: ListenAddress;
  readonly admin: ListenAddress;
}

/** The three listeners' addresses; the webhook one matters only when the ingress is on. */
export function readListeners(r: Reader): ListenersConfig {
  const decision = r.listen('listen', DEFAULT_DECISION_LISTEN, true);
  const webhook = r.listen('webhook-listen', DEFAULT_WEBHOOK_LISTEN);
  const admin = r.listen('admin-listen', DEFAULT_ADMIN_LISTEN);
  return Object.freeze({ decision, webhook, admin });
}

/** Two listeners on one port (a wildcard host overlaps every host): the second one named. */
export function checkPorts(r: Reader, listeners: ListenersConfig, webhooksOn: boolean, grpc?: ListenAddress): void {
  const ports: (readonly [string, ListenAddress])[] = [
    ['--listen', listeners.decision],
    ['--admin-listen', listeners.admin],
    ...(webhooksOn ? ([['--webhook-listen', listeners.webhook]] as const) : []),
    ...(grpc ? ([['--grpc-listen', grpc]] as const) : []),
  ];
  for (let i = 0; i < ports.length; i++) {
    for (let j = i + 1; j < ports.length; j++) {
      const [a, x] = ports[i]!;
      const [b, y] = ports[j]!;
      if (x.port !== 0 && x.port === y.port && (x.host === y.host || x.host === '0.0.0.0' || y.host === '0.0.0.0')) {
        r.problem(b, `uses the same port as ${a} (${x.port})`);
      }
    }
  }
}
