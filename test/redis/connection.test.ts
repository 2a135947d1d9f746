import { spawnSync } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../src/observability/index.js';
import { createRedisMetrics, RedisConnection, RedisError, RedisKeyspace, RedisScript } from '../../src/redis/index.js';
import { createRegistry } from '../../src/observability/registry.js';
import { adminOn, spawnRedisServer, useTestRedis } from '../helpers/redis.js';
import { connectionTo, count, single, up } from './room.js';

const fx = useTestRedis();
const { opened } = fx;

/** A logger whose lines a test can read. */
function capturedLogger(): { logger: ReturnType<typeof createLogger>; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  return { logger, lines };
}

describe('RedisConnection', () => {
  it('turns failures into typed errors: reply, timeout, unavailable, closed; only a timeout or a lost connection has an unknown outcome', async () => {
    // A Redis of its own: CLIENT PAUSE stops every client, and REDIS_URL may be shared with other tests.
    const own = await spawnRedisServer();
    opened.push({ close: () => own.stop() });
    const { conn, metrics } = await up(connectionTo(single(own.url), { opened, commandTimeoutMs: 200 }));
    const reply = await conn.call('bad', (c) => c.sendCommand(['NO_SUCH_COMMAND'])).catch((e: unknown) => e);
    expect(reply).toMatchObject({ code: 'ERR_REDIS_REPLY', outcomeUnknown: false });

    const pauser = await adminOn(own.url);
    try {
      await pauser.sendCommand(['CLIENT', 'PAUSE', '1500', 'ALL']);
      const slow = await conn.call('slow', (c) => c.sendCommand(['GET', 'x'])).catch((e: unknown) => e);
      expect(slow).toMatchObject({ code: 'ERR_REDIS_TIMEOUT', outcomeUnknown: true });
    } finally {
      await pauser.sendCommand(['CLIENT', 'UNPAUSE']);
      pauser.destroy();
    }
    expect(await count(metrics.callDuration as never, { op: 'slow', outcome: 'timeout' })).toBeGreaterThan(0);

    const dead = await spawnRedisServer();
    await dead.stop();
    const { conn: offline } = connectionTo(single(dead.url), { opened });
    const unavailable = await offline.call('get', (c) => c.sendCommand(['GET', 'x'])).catch((e: unknown) => e);
    expect(unavailable).toMatchObject({ code: 'ERR_REDIS_UNAVAILABLE', outcomeUnknown: false });

    await conn.close();
    const err = await conn.call('get', (c) => c.sendCommand(['GET', 'x'])).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RedisError);
    expect((err as RedisError).code).toBe('ERR_REDIS_CLOSED');
  });

  it('a call sent before Redis died under it has an unknown outcome (connection lost), not "unavailable"', async () => {
    const own = await spawnRedisServer();
    opened.push({ close: () => own.stop() });
    const { conn } = await up(connectionTo(single(own.url), { opened, commandTimeoutMs: 5000 }));
    own.freeze();
    const pending = conn.call('get', (c) => c.sendCommand(['GET', 'x'])).catch((e: unknown) => e);
    await own.kill();
    expect(await pending).toMatchObject({ code: 'ERR_REDIS_CONNECTION_LOST', outcomeUnknown: true });
  });

  // With the health check folded into the fleet's quiet poll, a connection may ask nothing for
  // half a minute; silence counted from its last answer would then make a Redis that stalled a
  // moment ago look silent past a lease at the first failed call (webhook dedup would fall back at
  // once, while another replica's claim may still be in flight).
  it('a quiet connection (its health check passed by a probing call, nothing failed since) checks nothing on its own, and silence counts from the first call Redis did not answer', async () => {
    const own = await spawnRedisServer();
    opened.push({ close: () => own.stop() });
    const quiet = await up(connectionTo(single(own.url), { opened, commandTimeoutMs: 200, quietHealthIntervalMs: 600_000 }));
    const watcher = await up(connectionTo(single(own.url), { opened, commandTimeoutMs: 200 }));
    const probe = new RedisScript(`redis.call('SET', KEYS[1], '1', 'PX', '60000') return 1`);
    await quiet.conn.call('probe', (c) => probe.run(c, [quiet.keyspace.key('health')], []), { probe: true });
    const checks = await count(quiet.metrics.callDuration as never, { op: 'health' });
    own.freeze();
    try {
      // A connection that checks every 100 ms sees it first: time passes with no call from the quiet one.
      await vi.waitFor(() => expect(watcher.conn.isUp).toBe(false), { timeout: 10_000 });
      expect(quiet.conn.isUp).toBe(true);
      expect(quiet.conn.silentForMs()).toBe(0);
      const sentAt = performance.now();
      await expect(quiet.conn.call('get', (c) => c.sendCommand(['GET', 'x']))).rejects.toMatchObject({ code: 'ERR_REDIS_TIMEOUT' });
      const silent = quiet.conn.silentForMs();
      expect(silent).toBeGreaterThan(0);
      expect(silent).toBeLessThanOrEqual(performance.now() - sentAt);
      // The failed call puts the connection in doubt: it checks on its own again, and finds Redis down.
      await vi.waitFor(() => expect(quiet.conn.isUp).toBe(false), { timeout: 10_000 });
      expect(await count(quiet.metrics.callDuration as never, { op: 'health' })).toBeGreaterThan(checks);
    } finally {
      own.thaw();
    }
    await vi.waitFor(() => expect(quiet.conn.isUp).toBe(true), { timeout: 10_000 });
    expect(quiet.conn.silentForMs()).toBe(0);
  });

  it('RedisScript loads itself again after SCRIPT FLUSH (NOSCRIPT → EVAL)', async () => {
    const { conn } = await up(connectionTo(single(fx.redis.url), { opened }));
    const script = new RedisScript(`return ARGV[1] .. '!'`);
    expect(await conn.call('s', (c) => script.run(c, [], ['a']))).toBe('a!');
    await fx.admin.sendCommand(['SCRIPT', 'FLUSH']);
    expect(await conn.call('s', (c) => script.run(c, [], ['b']))).toBe('b!');
  });

  // The keys used to be `tenant-a:dedup:evt_1`; they now carry the prefix as a hash tag so that a
  // cluster keeps every key of a deployment on one slot (contract, Redis topologies).
  it('keys and channels live under the prefix, inside one hash tag; a prefix with a brace is refused', () => {
    const ks = new RedisKeyspace('tenant-a:');
    expect(ks.key('dedup', 'evt_1')).toBe('{tenant-a:}dedup:evt_1');
    expect(ks.key('queue', 'stream')).toBe('{tenant-a:}queue:stream');
    expect(ks.channel('invalidate')).toBe('{tenant-a:}invalidate');
    expect(() => new RedisKeyspace('a{b}:')).toThrow(RangeError);
  });

  it('moves to the new URL read from the secret, and subscriptions follow', async () => {
    const dead = await spawnRedisServer();
    await dead.stop();
    let url = dead.url;
    const { conn } = connectionTo(() => single(url), { opened, commandTimeoutMs: 300 });
    const got: string[] = [];
    const channel = `${fx.redis.prefix()}rotation`;
    await conn.subscribe(channel, (m) => got.push(m));
    expect(conn.isUp).toBe(false);

    url = fx.redis.url; // what a re-read --redis-url-file would give
    await vi.waitFor(() => expect(conn.isUp).toBe(true), { timeout: 5000 });
    expect(await conn.call('get', (c) => c.sendCommand(['PING']))).toBe('PONG');
    await vi.waitFor(
      async () => {
        await fx.admin.publish(channel, 'hello');
        expect(got).toContain('hello');
      },
      { timeout: 5000, interval: 100 },
    );
  });
});

describe('redis_up tells the truth: a Redis that answers PING but not the commands the sidecar needs is down, with the reason logged once', () => {
  it('a read-only replica: 0, READONLY', async () => {
    const primary = await spawnRedisServer();
    opened.push({ close: () => primary.stop() });
    const replica = await spawnRedisServer({ args: ['--save', '', '--appendonly', 'no', '--replicaof', '127.0.0.1', String(primary.port)] });
    opened.push({ close: () => replica.stop() });
    const { logger, lines } = capturedLogger();
    const c = connectionTo(single(replica.url), { opened, logger });
    // It answers PING…
    await vi.waitFor(async () => expect(await c.conn.call('ping', (x) => x.sendCommand(['PING']))).toBe('PONG'), { timeout: 5000 });
    await vi.waitFor(() => expect(lines.some((l) => l.event === 'redis_down' && l.reason === 'READONLY')).toBe(true), { timeout: 5000 });
    expect(await count(c.metrics.up)).toBe(0);
    expect(c.conn.isUp).toBe(false);
    // once, not each second
    const healthChecks = async () => count(c.metrics.callDuration as never, { op: 'health' });
    const before = await healthChecks();
    await vi.waitFor(async () => expect(await healthChecks()).toBeGreaterThan(before + 3), { timeout: 5000 });
    // Once per reason: READONLY said once. (A replica still syncing may first answer otherwise, e.g.
    // LOADING on a loaded machine; that is another reason, said once too.)
    expect(lines.filter((l) => l.event === 'redis_down' && l.reason === 'READONLY').length).toBe(1);
    const reasons = lines.filter((l) => l.event === 'redis_down').map((l) => l.reason);
    expect(new Set(reasons).size).toBe(reasons.length);
  });

  it('a wrong password: 0, the reason logged (never the password)', async () => {
    const own = await spawnRedisServer({ args: ['--save', '', '--appendonly', 'no', '--requirepass', 's3cret-pw'] });
    opened.push({ close: () => own.stop() });
    const { logger, lines } = capturedLogger();
    const c = connectionTo(single(`redis://:wrong-pw@127.0.0.1:${own.port}`), { opened, logger });
    await vi.waitFor(() => expect(lines.some((l) => l.event === 'redis_down')).toBe(true), { timeout: 5000 });
    expect(await count(c.metrics.up)).toBe(0);
    expect(JSON.stringify(lines)).not.toContain('wrong-pw');
    // with the right one it is up
    const ok = await up(connectionTo(single(`redis://:s3cret-pw@127.0.0.1:${own.port}`), { opened }));
    expect(await count(ok.metrics.up)).toBe(1);
  });

  it('TLS with a private CA (--redis-tls-ca-file): up; without trusting the CA: down', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cs-tls-'));
    const pki = makeCertificates(dir);
    const own = await spawnRedisServer({
      tls: true,
      args: ['--save', '', '--appendonly', 'no', '--tls-cert-file', pki.cert, '--tls-key-file', pki.key, '--tls-ca-cert-file', pki.ca, '--tls-auth-clients', 'no'],
    });
    opened.push({ close: () => own.stop() });
    const trusted = await up(connectionTo({ kind: 'single', url: `rediss://localhost:${own.port}`, tlsCa: pki.caPem }, { opened }));
    expect(await trusted.conn.call('ping', (x) => x.sendCommand(['PING']))).toBe('PONG');
    const { logger, lines } = capturedLogger();
    const untrusted = connectionTo({ kind: 'single', url: `rediss://localhost:${own.port}` }, { opened, logger });
    // The handshake is refused (the system CAs do not know ours), and said so.
    await vi.waitFor(() => expect(lines.some((l) => l.event === 'redis_error' && /certificate/i.test(String(l.msg)))).toBe(true), { timeout: 5000 });
    await vi.waitFor(() => expect(lines.some((l) => l.event === 'redis_down')).toBe(true), { timeout: 5000 });
    expect(untrusted.conn.isUp).toBe(false);
  });
});

/** A CA and a server certificate for `localhost`, made with openssl. */
function makeCertificates(dir: string): { ca: string; caPem: string; cert: string; key: string } {
  const run = (args: string[]): void => {
    const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`openssl ${args.join(' ')} failed (install openssl): ${r.stderr}`);
  };
  run(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=test-ca']);
  run(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=localhost']);
  writeFileSync(join(dir, 'ext.cnf'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
  run(['x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.crt', '-days', '2', '-extfile', 'ext.cnf']);
  return { ca: join(dir, 'ca.crt'), caPem: readFileSync(join(dir, 'ca.crt'), 'utf8'), cert: join(dir, 'server.crt'), key: join(dir, 'server.key') };
}

describe('--redis-wait-replicas against the replicas the master has', () => {
  it('a master with more replicas than it names is said once (a failover may lose what was acknowledged); fewer attached than it names is said too; matching again is said', async () => {
    const master = await spawnRedisServer();
    opened.push({ close: () => master.stop() });
    const replicaArgs = ['--save', '', '--appendonly', 'no', '--replicaof', '127.0.0.1', String(master.port)];
    const replicas = [await spawnRedisServer({ args: replicaArgs }), await spawnRedisServer({ args: replicaArgs })];
    for (const r of replicas) opened.push({ close: () => r.stop() });
    const admin = await adminOn(master.url);
    const attached = async (): Promise<number> => Number(/connected_slaves:(\d+)/.exec(String(await admin.sendCommand(['INFO', 'replication'])))?.[1]);
    try {
      await vi.waitFor(async () => expect(await attached()).toBe(2), { timeout: 20_000 });
      const { logger, lines } = capturedLogger();
      const registry = createRegistry({ defaultMetrics: false });
      const conn = new RedisConnection({
        target: () => single(master.url),
        keyspace: new RedisKeyspace('wait:'),
        commandTimeoutMs: 1000,
        logger,
        metrics: createRedisMetrics(registry),
        healthIntervalMs: 50,
        waitReplicas: 1,
        replicaCheckIntervalMs: 50,
      });
      opened.push(conn);
      conn.start();
      const said = (event: string) => lines.filter((l) => l.event === event);
      await vi.waitFor(() => expect(said('redis_wait_replicas_below_replicas')).toHaveLength(1), { timeout: 10_000 });
      expect(said('redis_wait_replicas_below_replicas')[0]).toMatchObject({ level: 'warn', waitReplicas: 1, replicas: 2 });
      expect(String(said('redis_wait_replicas_below_replicas')[0]!.msg)).toContain('set it to 2');

      // Both replicas gone: nothing can be acknowledged until one is back.
      await Promise.all(replicas.map((r) => r.stop()));
      await vi.waitFor(() => expect(said('redis_wait_replicas_unmet')).toHaveLength(1), { timeout: 20_000 });
      expect(said('redis_wait_replicas_unmet')[0]).toMatchObject({ level: 'warn', waitReplicas: 1, replicas: 0 });
      // One back: as many as it names.
      await replicas[0]!.start();
      await vi.waitFor(() => expect(said('redis_wait_replicas_met')).toHaveLength(1), { timeout: 20_000 });
      // Said once per change, not at every check.
      expect(said('redis_wait_replicas_below_replicas')).toHaveLength(1);
      expect(said('redis_wait_replicas_unmet')).toHaveLength(1);
      expect(conn.isUp).toBe(true);
    } finally {
      admin.destroy();
    }
  });
});
