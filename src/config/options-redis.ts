import { secretFlagWarning, type OptionSpec } from './option-spec.js';

// Several replicas: where Redis is, TLS, the key prefix, the deadline.

/** Prefix of every Redis key and channel, so several deployments can share one Redis. */
export const DEFAULT_REDIS_KEY_PREFIX = 'consent-sidecar:';
/** Deadline of every Redis call (ms); beyond it the outcome of the call is unknown (a dedup claim answers 503). */
export const DEFAULT_REDIS_COMMAND_TIMEOUT_MS = 500;

export const REDIS_OPTIONS: readonly OptionSpec[] = [
  {
    name: 'redis-url',
    arg: '<url>',
    description: 'one Redis for state shared by replicas (dedup, invalidations, queue); redis:// or rediss:// (TLS), credentials in the URL',
    secret: true,
  },
  { name: 'redis-url-file', arg: '<path>', description: 'file holding the Redis URL (credentials inside); re-read when it changes' },
  {
    name: 'redis-cluster-nodes',
    arg: '<urls>',
    description: 'a Redis Cluster instead: seed nodes, comma-separated host:port or redis[s]:// URLs (credentials in the first)',
    secret: true,
  },
  { name: 'redis-cluster-nodes-file', arg: '<path>', description: 'file holding the cluster seed nodes; re-read when it changes' },
  {
    name: 'redis-sentinels',
    arg: '<urls>',
    description: 'a Sentinel-managed Redis instead: the sentinels, comma-separated host:port or redis[s]:// URLs (credentials in the first serve sentinels and master)',
    secret: true,
  },
  { name: 'redis-sentinels-file', arg: '<path>', description: 'file holding the sentinels; re-read when it changes' },
  { name: 'redis-sentinel-master', arg: '<name>', description: 'with --redis-sentinels: the name the sentinels monitor the master under' },
  { name: 'redis-tls-ca-file', arg: '<path>', description: 'PEM of a private CA to trust for rediss:// (default: the system CAs); re-read when it changes' },
  {
    name: 'redis-wait-replicas',
    arg: '<n>',
    description: 'queue mode and shared revocations: acknowledge only what this many Redis replicas hold (WAIT), so a failover loses nothing acknowledged',
    defaultText: '0',
  },
  { name: 'redis-key-prefix', arg: '<prefix>', description: 'prefix of every Redis key and channel', defaultText: DEFAULT_REDIS_KEY_PREFIX },
  {
    name: 'redis-command-timeout-ms',
    arg: '<ms>',
    description: 'deadline of every Redis call',
    defaultText: String(DEFAULT_REDIS_COMMAND_TIMEOUT_MS),
  },
];
