import { describe, expect, it } from 'vitest';
import { DEFAULT_GRPC_MAX_CONCURRENT_STREAMS, DEFAULT_GRPC_MAX_MESSAGE_BYTES, loadServeConfig, type RawFlags } from '../../src/config/index.js';
import {
  DEFAULT_GRPC_IDLE_TIMEOUT_MS,
  DEFAULT_GRPC_MAX_CONNECTIONS,
  DEFAULT_GRPC_MAX_STREAMS,
  DEFAULT_GRPC_MAX_UNFINISHED_BYTES,
  DEFAULT_GRPC_PREFACE_TIMEOUT_MS,
  DEFAULT_GRPC_REQUEST_TIMEOUT_MS,
} from '../../src/config/grpc.js';
import { configProblems } from '../helpers/config.js';

// --grpc-listen (CONTRACT.md, gRPC ext_authz) and its bounds: off by default, host:port or
// unix:/path, no port shared with another listener, every problem naming its flag.

const base = { 'upstream-url': 'http://127.0.0.1:7800', 'api-key': 'k' };

describe('--grpc-listen and its bounds', () => {
  it('off by default; on with host:port or unix:/path, from the flag or the variable, with the default bounds', () => {
    expect(loadServeConfig(base, {}).grpc).toBeNull();
    expect(loadServeConfig({ ...base, 'grpc-listen': '127.0.0.1:7703' }, {}).grpc).toEqual({
      listen: { host: '127.0.0.1', port: 7703 },
      maxMessageBytes: DEFAULT_GRPC_MAX_MESSAGE_BYTES,
      maxConcurrentStreams: DEFAULT_GRPC_MAX_CONCURRENT_STREAMS,
      bounds: {
        maxConnections: DEFAULT_GRPC_MAX_CONNECTIONS,
        maxStreams: DEFAULT_GRPC_MAX_STREAMS,
        prefaceTimeoutMs: DEFAULT_GRPC_PREFACE_TIMEOUT_MS,
        idleTimeoutMs: DEFAULT_GRPC_IDLE_TIMEOUT_MS,
        requestTimeoutMs: DEFAULT_GRPC_REQUEST_TIMEOUT_MS,
        maxUnfinishedBytes: DEFAULT_GRPC_MAX_UNFINISHED_BYTES,
      },
    });
    expect([DEFAULT_GRPC_MAX_CONNECTIONS, DEFAULT_GRPC_PREFACE_TIMEOUT_MS, DEFAULT_GRPC_IDLE_TIMEOUT_MS, DEFAULT_GRPC_REQUEST_TIMEOUT_MS, DEFAULT_GRPC_MAX_UNFINISHED_BYTES]).toEqual([256, 10_000, 300_000, 10_000, 16_777_216]);
    // Envoy opens another connection past a connection's streams; the listener as a whole holds at most 4,096.
    expect([DEFAULT_GRPC_MAX_CONCURRENT_STREAMS, DEFAULT_GRPC_MAX_STREAMS]).toEqual([100, 4096]);
    expect(loadServeConfig(base, { CONSENT_SIDECAR_GRPC_LISTEN: 'unix:/run/cs/grpc.sock' }).grpc?.listen).toEqual({ host: 'unix', port: 0, path: '/run/cs/grpc.sock' });
    const bounded = loadServeConfig(
      {
        ...base,
        'grpc-listen': '[::1]:0',
        'grpc-max-message-bytes': '4096',
        'grpc-max-concurrent-streams': '10',
        'grpc-max-connections': '8',
        'grpc-max-streams': '50',
        'grpc-preface-timeout-ms': '100',
        'grpc-idle-timeout-ms': '200',
        'grpc-request-timeout-ms': '300',
        'grpc-max-unfinished-bytes': '4101',
      },
      {},
    ).grpc;
    expect(bounded).toEqual({
      listen: { host: '::1', port: 0 },
      maxMessageBytes: 4096,
      maxConcurrentStreams: 10,
      bounds: { maxConnections: 8, maxStreams: 50, prefaceTimeoutMs: 100, idleTimeoutMs: 200, requestTimeoutMs: 300, maxUnfinishedBytes: 4101 },
    });
    expect(DEFAULT_GRPC_MAX_MESSAGE_BYTES).toBe(65_536);
  });

  it.each<[string, RawFlags, Record<string, string>, string]>([
    ['not an address', { ...base, 'grpc-listen': 'localhost' }, {}, '--grpc-listen: expected host:port'],
    ['a relative socket path', { ...base, 'grpc-listen': 'unix:run/grpc.sock' }, {}, '--grpc-listen: expected unix:/absolute/path'],
    ['the decision port', { ...base, listen: '127.0.0.1:7700', 'grpc-listen': '127.0.0.1:7700' }, {}, '--grpc-listen: uses the same port as --listen (7700)'],
    ['the admin port on a wildcard', { ...base, 'grpc-listen': '127.0.0.1:7702' }, {}, '--grpc-listen: uses the same port as --admin-listen (7702)'],
    ['a message limit under 1 KiB', { ...base, 'grpc-max-message-bytes': '100' }, {}, '--grpc-max-message-bytes: must be an integer from 1024 to 8388608'],
    ['no streams', { ...base, 'grpc-max-concurrent-streams': '0' }, {}, '--grpc-max-concurrent-streams: must be an integer from 1'],
    ['no streams across connections', { ...base, 'grpc-max-streams': '0' }, {}, '--grpc-max-streams: must be an integer from 1'],
    ['no connections', { ...base, 'grpc-max-connections': '0' }, {}, '--grpc-max-connections: must be an integer from 1'],
    ['no time for the preface', { ...base, 'grpc-preface-timeout-ms': '0' }, {}, '--grpc-preface-timeout-ms: must be an integer from 1'],
    ['an idle timeout that is not a number', { ...base, 'grpc-idle-timeout-ms': 'soon' }, {}, '--grpc-idle-timeout-ms: must be an integer'],
    ['no time for a request', { ...base, 'grpc-request-timeout-ms': '0' }, {}, '--grpc-request-timeout-ms: must be an integer from 1'],
    [
      'a byte budget smaller than one message',
      { ...base, 'grpc-max-message-bytes': '65536', 'grpc-max-unfinished-bytes': '65540' },
      {},
      '--grpc-max-unfinished-bytes: must be at least --grpc-max-message-bytes plus 5 (65541)',
    ],
    ['a bad address from the variable', base, { CONSENT_SIDECAR_GRPC_LISTEN: 'nope' }, '--grpc-listen (from CONSENT_SIDECAR_GRPC_LISTEN): expected host:port'],
  ])('%s → names the flag', (_name, flags, env, expected) => {
    const found = configProblems(flags, env);
    expect(found.some((p) => p.startsWith(expected)), `${JSON.stringify(found)} should contain "${expected}"`).toBe(true);
  });
});
