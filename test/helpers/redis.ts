import { createClient } from '@redis/client';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request as httpRequest } from 'node:http';
import { freePort } from './ports.js';

/**
 * A real Redis for a test file, in this order:
 * 1. `REDIS_URL` when set (CI with a service container, a developer's own Redis);
 * 2. testcontainers (`@testcontainers/redis`) when a Docker engine answers (checked quickly);
 * 3. `redis-server` (Debian package `redis-server`) spawned on a free port, no persistence.
 * With none of them the test fails saying how to get one; it never skips.
 */
export interface TestRedis {
  readonly url: string;
  /** How it was obtained: `env`, `testcontainers` or `redis-server`. */
  readonly source: 'env' | 'testcontainers' | 'redis-server';
  /** A fresh key prefix, so tests sharing a Redis never see each other's keys. */
  prefix(): string;
  stop(): Promise<void>;
}

const HOW_TO_GET_ONE =
  'no Redis for the tests: set REDIS_URL=redis://host:port, or run a Docker engine (testcontainers), ' +
  'or install redis-server (Debian/Ubuntu: apt-get install redis-server; `bash test/setup.sh` does it)';

const freshPrefix = (): string => `test-${randomBytes(6).toString('hex')}:`;

export async function getTestRedis(): Promise<TestRedis> {
  const fromEnv = process.env.REDIS_URL;
  if (fromEnv) {
    await mustAnswer(fromEnv);
    return { url: fromEnv, source: 'env', prefix: freshPrefix, stop: async () => undefined };
  }
  if (await dockerAnswers()) {
    const started = await tryTestcontainers();
    if (started) return started;
  }
  if (redisServerBinary()) {
    const server = await spawnRedisServer();
    return { url: server.url, source: 'redis-server', prefix: freshPrefix, stop: () => server.stop() };
  }
  throw new Error(HOW_TO_GET_ONE);
}

/** Fails at once, naming REDIS_URL, when the Redis it points at does not answer PING. */
async function mustAnswer(url: string): Promise<void> {
  const client = createClient({ url, socket: { connectTimeout: 3000, reconnectStrategy: false } });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.ping();
  } catch (err) {
    throw new Error(`REDIS_URL is set but that Redis does not answer (${(err as Error).message}); unset it to use testcontainers or redis-server`);
  } finally {
    if (client.isOpen) client.destroy();
  }
}

/** A `redis-server` process of our own, which a test can stop, freeze and start again on the same port. */
export interface SpawnedRedis {
  readonly url: string;
  readonly port: number;
  /** Stops it (SIGTERM, then SIGKILL after 2 s); idempotent. */
  stop(): Promise<void>;
  /** SIGKILL: no shutdown, no last save. */
  kill(): Promise<void>;
  /** Starts it again on the same port (empty unless its args persist: `--appendonly yes` with a `--dir`). */
  start(): Promise<void>;
  /** SIGSTOP: the process is frozen, its sockets stay open (a fork, a slow disk, a noisy neighbour). */
  freeze(): void;
  /** SIGCONT. */
  thaw(): void;
  /** Everything it printed so far. */
  output(): string;
}

export interface SpawnOptions {
  /** Arguments after `--port <port> --bind 127.0.0.1` (default `--save "" --appendonly no`). */
  readonly args?: readonly string[];
  /** The port to listen on (default: a free one). With `tlsPort: true` this is the TLS port. */
  readonly port?: number;
  /** Serve TLS on the port (`--tls-port`, the plain port off); the args must carry the certificates. */
  readonly tls?: boolean;
  /** What its log says when it is ready (default `Ready to accept connections`). */
  readonly readyText?: string;
  /** A configuration file, given first (as `redis-server <file> …` wants it; a sentinel rewrites it). */
  readonly configFile?: string;
}

const NO_PERSISTENCE = ['--save', '', '--appendonly', 'no'];

/** Path of `redis-server`, or null. */
export function redisServerBinary(): string | null {
  for (const p of ['/usr/bin/redis-server', '/usr/local/bin/redis-server', '/usr/sbin/redis-server']) if (existsSync(p)) return p;
  const found = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' });
  return found.status === 0 && found.stdout.trim() !== '' ? found.stdout.trim() : null;
}

/** Spawns `redis-server` on a free port (no persistence by default); fails with how to install it when absent. */
export async function spawnRedisServer(options: SpawnOptions = {}): Promise<SpawnedRedis> {
  const binary = redisServerBinary();
  if (!binary) throw new Error(HOW_TO_GET_ONE);
  let port = options.port ?? (await freePort());
  const extra = options.args ?? NO_PERSISTENCE;
  // Its own directory, so nothing it writes (a dump, an AOF) lands in the working tree.
  const dir = extra.includes('--dir') || options.configFile ? [] : ['--dir', mkdtempSync(join(tmpdir(), 'cs-redis-'))];
  const argsFor = (p: number): string[] => [
    ...(options.configFile ? [options.configFile] : []),
    ...(options.tls ? ['--port', '0', '--tls-port', String(p)] : ['--port', String(p)]),
    '--bind',
    '127.0.0.1',
    ...dir,
    ...extra,
  ];
  const readyText = options.readyText ?? 'Ready to accept connections';
  let child: ChildProcess | undefined;
  let out = '';
  let started = false;

  /**
   * Starts it; a port another process took meanwhile (a free port is free only when it was
   * looked at: the suite's other processes, both Node lines at once, take ports too, and an
   * outgoing connection may get a stopped server's port as its own) is not a failure of the test:
   * the first start takes another free port, a restart (its clients know the port) waits for it.
   */
  const start = async (): Promise<void> => {
    for (let attempt = 1; ; attempt++) {
      try {
        await startOnce();
        started = true;
        return;
      } catch (err) {
        if (!/Address already in use/.test((err as Error).message) || attempt >= 50) throw err;
        if (!started && options.port === undefined) port = await freePort();
        else await new Promise((r) => setTimeout(r, 200));
      }
    }
  };

  const startOnce = async (): Promise<void> => {
    if (child) return;
    const args = argsFor(port);
    const c = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child = c;
    const from = out.length;
    c.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
    c.stderr!.on('data', (chunk: Buffer) => (out += chunk.toString()));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`redis-server on port ${port} not ready within 20 s:\n${out.slice(from)}`)), 20_000);
      const check = (): void => {
        if (out.slice(from).includes(readyText)) {
          clearTimeout(timer);
          c.stdout!.off('data', check);
          resolve();
        }
      };
      c.stdout!.on('data', check);
      c.once('exit', (code) => {
        clearTimeout(timer);
        if (child === c) child = undefined;
        reject(new Error(`redis-server exited ${code} before ready:\n${out.slice(from)}`));
      });
    });
    c.once('exit', () => {
      if (child === c) child = undefined;
    });
  };

  const end = async (signal: NodeJS.Signals): Promise<void> => {
    const c = child;
    child = undefined;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      const kill = setTimeout(() => c.kill('SIGKILL'), 2000);
      c.once('exit', () => {
        clearTimeout(kill);
        resolve();
      });
      c.kill('SIGCONT'); // a frozen process cannot act on SIGTERM
      c.kill(signal);
    });
  };

  await start();
  return {
    url: `${options.tls ? 'rediss' : 'redis'}://127.0.0.1:${port}`,
    port,
    stop: () => end('SIGTERM'),
    kill: () => end('SIGKILL'),
    start,
    freeze: () => void child?.kill('SIGSTOP'),
    thaw: () => void child?.kill('SIGCONT'),
    output: () => out,
  };
}

/**
 * Bytes received and not yet read on the server side of established TCP connections to `port`
 * (Linux /proc/net/tcp*): with a frozen `redis-server`, proof that a command was sent and waits.
 */
export function unreadBytesAt(port: number): number {
  let unread = 0;
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 5 || f[3] !== '01') continue; // 01: ESTABLISHED
      if (parseInt(f[1]!.split(':')[1]!, 16) !== port) continue;
      unread += parseInt(f[4]!.split(':')[1]!, 16);
    }
  }
  return unread;
}

/** Path of `redis-cli` (Debian package `redis-tools`, installed with `redis-server`), or a failure saying so. */
export function redisCliBinary(): string {
  for (const p of ['/usr/bin/redis-cli', '/usr/local/bin/redis-cli']) if (existsSync(p)) return p;
  throw new Error('redis-cli not found: install redis-tools (Debian/Ubuntu: apt-get install redis-tools; `bash test/setup.sh` does it)');
}

/** A Redis Cluster of spawned `redis-server`s (masters, each with its replicas), made with `redis-cli --cluster create`. */
export interface SpawnedCluster {
  readonly nodes: readonly SpawnedRedis[];
  /** Seed URLs, comma-separated, as `--redis-cluster-nodes` takes them. */
  readonly seeds: string;
  /** The node serving `slot` as master right now. */
  masterOf(slot: number): Promise<SpawnedRedis>;
  stop(): Promise<void>;
}

/** A client on one node, for a command or two. */
export async function adminOn(url: string) {
  const client = createClient({ url, socket: { reconnectStrategy: false } });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

/**
 * One cluster node on two free ports: its own and its cluster bus (`--cluster-port`; by default
 * the bus takes port + 10000, which an outgoing connection of anyone's may hold). A port taken
 * between the look and the bind is tried again with two others.
 */
async function spawnClusterNode(args: readonly string[] | undefined): Promise<SpawnedRedis> {
  for (let attempt = 1; ; attempt++) {
    const [port, bus] = [await freePort(), await freePort()];
    const dir = mkdtempSync(join(tmpdir(), 'cs-cluster-'));
    try {
      return await spawnRedisServer({
        port,
        args: ['--cluster-enabled', 'yes', '--cluster-port', String(bus), '--cluster-config-file', join(dir, 'nodes.conf'), '--cluster-node-timeout', '1000', '--dir', dir, ...(args ?? NO_PERSISTENCE)],
      });
    } catch (err) {
      if (attempt >= 5 || !/Address already in use/.test((err as Error).message)) throw err;
    }
  }
}

/**
 * Spawns `masters × (1 + replicasPerMaster)` nodes with `--cluster-enabled yes` and joins them with
 * `redis-cli --cluster create`, then waits until the cluster says `cluster_state:ok` on every node.
 */
export async function spawnRedisCluster(o: { masters?: number; replicasPerMaster?: number; args?: readonly string[] } = {}): Promise<SpawnedCluster> {
  const masters = o.masters ?? 3;
  const replicas = o.replicasPerMaster ?? 1;
  const nodes: SpawnedRedis[] = [];
  try {
    for (let i = 0; i < masters * (1 + replicas); i++) nodes.push(await spawnClusterNode(o.args));
    const created = spawnSync(
      redisCliBinary(),
      ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', String(replicas), '--cluster-yes'],
      { encoding: 'utf8', timeout: 60_000 },
    );
    if (created.status !== 0) throw new Error(`redis-cli --cluster create failed:\n${created.stdout}\n${created.stderr}`);
    await waitForClusterOk(nodes);
  } catch (err) {
    await Promise.all(nodes.map((n) => n.stop()));
    throw err;
  }
  return {
    nodes,
    seeds: nodes.slice(0, masters).map((n) => n.url).join(','),
    async masterOf(slot: number) {
      for (const n of nodes) {
        let c;
        try {
          c = await adminOn(n.url);
        } catch {
          continue;
        }
        try {
          const slots = (await c.sendCommand(['CLUSTER', 'SLOTS'])) as [number, number, [string, number]][];
          for (const [from, to, [, port]] of slots) if (slot >= from && slot <= to) return nodes.find((x) => x.port === Number(port))!;
        } finally {
          c.destroy();
        }
      }
      throw new Error(`no node answers CLUSTER SLOTS for slot ${slot}`);
    },
    stop: async () => void (await Promise.all(nodes.map((n) => n.stop()))),
  };
}

/** Waits until every live node of `nodes` says `cluster_state:ok`. */
export async function waitForClusterOk(nodes: readonly SpawnedRedis[], timeoutMs = 30_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    let ok = true;
    for (const n of nodes) {
      try {
        const c = await adminOn(n.url);
        try {
          if (!String(await c.sendCommand(['CLUSTER', 'INFO'])).includes('cluster_state:ok')) ok = false;
        } finally {
          c.destroy();
        }
      } catch {
        // a node that was stopped on purpose is not asked
      }
    }
    if (ok) return;
    if (Date.now() > until) throw new Error('the Redis cluster did not reach cluster_state:ok');
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The slot of a key (CRC16 of its hash tag), as Redis Cluster computes it. */
export function slotOf(key: string): number {
  const open = key.indexOf('{');
  if (open >= 0) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) key = key.slice(open + 1, close);
  }
  let crc = 0;
  for (const byte of Buffer.from(key)) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % 16384;
}

/** A primary, its replicas and sentinels (`redis-server --sentinel`), monitoring it as `master`. */
export interface SpawnedSentinels {
  readonly primary: SpawnedRedis;
  readonly replicas: readonly SpawnedRedis[];
  readonly sentinels: readonly SpawnedRedis[];
  /** `host:port,…` as `--redis-sentinels` takes it. */
  readonly addresses: string;
  readonly masterName: string;
  /** The port of the master a majority of the sentinels name now; rejects while no majority names one. */
  currentMasterPort(): Promise<number>;
  stop(): Promise<void>;
}

export async function spawnSentinels(o: { sentinels?: number; replicas?: number; masterName?: string; args?: readonly string[] } = {}): Promise<SpawnedSentinels> {
  const masterName = o.masterName ?? 'mymaster';
  const started: SpawnedRedis[] = [];
  try {
    // Data nodes: `args` instead of no persistence, each in a directory of its own with a
    // configuration file holding its role, as deployed: Sentinel rewrites it (CONFIG REWRITE) when
    // it promotes or demotes the node, so a node restarted keeps the role Sentinel gave it last.
    // With the role on the command line instead, a promoted replica restarted came back a replica
    // of the first primary (itself a replica by then): a master the sentinels kept naming while it
    // answered READONLY, until they failed over on their own 20-30 s later, in the middle of the
    // chaos nemesis' next failover ("no new master within 30 s", seeds 777 and 4242).
    const data = o.args ?? NO_PERSISTENCE;
    const dataNode = async (role: string[]): Promise<SpawnedRedis> => {
      const dir = mkdtempSync(join(tmpdir(), 'cs-sentinel-data-'));
      const configFile = join(dir, 'redis.conf');
      writeFileSync(configFile, [`dir ${dir}`, ...role].join('\n') + '\n');
      return spawnRedisServer({ configFile, args: [...data] });
    };
    const primary = await dataNode([]);
    started.push(primary);
    const replicas: SpawnedRedis[] = [];
    for (let i = 0; i < (o.replicas ?? 1); i++) {
      replicas.push(await dataNode([`replicaof 127.0.0.1 ${primary.port}`]));
      started.push(replicas[i]!);
    }
    const sentinels: SpawnedRedis[] = [];
    for (let i = 0; i < (o.sentinels ?? 3); i++) {
      const dir = mkdtempSync(join(tmpdir(), 'cs-sentinel-'));
      const conf = join(dir, 'sentinel.conf');
      writeFileSync(
        conf,
        [
          `sentinel monitor ${masterName} 127.0.0.1 ${primary.port} 2`,
          `sentinel down-after-milliseconds ${masterName} 1000`,
          `sentinel failover-timeout ${masterName} 5000`,
          `sentinel parallel-syncs ${masterName} 1`,
          `dir ${dir}`,
        ].join('\n') + '\n',
      );
      sentinels.push(await spawnRedisServer({ configFile: conf, args: ['--sentinel'], readyText: 'Sentinel ID is' }));
      started.push(sentinels[sentinels.length - 1]!);
    }
    const out: SpawnedSentinels = {
      primary,
      replicas,
      sentinels,
      addresses: sentinels.map((s) => `127.0.0.1:${s.port}`).join(','),
      masterName,
      async currentMasterPort() {
        // The master a majority of the sentinels names. One sentinel alone can be wrong for as long
        // as it likes: one that started a failover from a stale view names the replica it promoted
        // until that failover ends, and it cannot end while that replica is down (seed 4242 of the
        // chaos run: sentinel 1 named the killed master for 30 s after the other two had moved on).
        const named = await Promise.all(
          sentinels.map(async (s) => {
            const c = await adminOn(s.url).catch(() => null);
            if (!c) return null;
            try {
              const reply = (await c.sendCommand(['SENTINEL', 'GET-MASTER-ADDR-BY-NAME', masterName])) as [string, string] | null;
              return reply ? Number(reply[1]) : null;
            } catch {
              return null;
            } finally {
              c.destroy();
            }
          }),
        );
        const votes = new Map<number, number>();
        for (const port of named) if (port !== null) votes.set(port, (votes.get(port) ?? 0) + 1);
        const majority = [...votes].find(([, n]) => n > sentinels.length / 2);
        if (!majority) throw new Error(`no master named by a majority of the sentinels (they name ${named.map((p) => p ?? 'nothing').join(', ')})`);
        return majority[0];
      },
      stop: async () => void (await Promise.all(started.map((n) => n.stop()))),
    };
    // The replica is in sync and every sentinel knows it before a test kills anything.
    const until = Date.now() + 30_000;
    for (;;) {
      const c = await adminOn(primary.url);
      const info = String(await c.sendCommand(['INFO', 'replication']));
      c.destroy();
      let known = 0;
      for (const s of sentinels) {
        const sc = await adminOn(s.url);
        const seen = (await sc.sendCommand(['SENTINEL', 'REPLICAS', masterName])) as unknown[];
        sc.destroy();
        if (seen.length >= replicas.length) known++;
      }
      if (info.includes(`connected_slaves:${replicas.length}`) && known === sentinels.length) break;
      if (Date.now() > until) throw new Error('the Sentinel set-up did not settle (replica in sync, known to every sentinel) within 30 s');
      await new Promise((r) => setTimeout(r, 200));
    }
    return out;
  } catch (err) {
    await Promise.all(started.map((n) => n.stop()));
    throw err;
  }
}

/**
 * Whether a Docker engine answers `GET /_ping` within 2 s (DOCKER_HOST tcp://, or the usual unix
 * sockets), so machines without one never wait on testcontainers' own discovery.
 */
async function dockerAnswers(): Promise<boolean> {
  const host = process.env.DOCKER_HOST;
  const targets: ({ socketPath: string } | { host: string; port: number })[] = [];
  if (host?.startsWith('unix://')) targets.push({ socketPath: host.slice('unix://'.length) });
  else if (host?.startsWith('tcp://')) {
    const u = new URL(host.replace(/^tcp:/, 'http:'));
    targets.push({ host: u.hostname, port: Number(u.port || 2375) });
  } else {
    for (const p of ['/var/run/docker.sock', `${process.env.HOME ?? ''}/.docker/run/docker.sock`]) if (existsSync(p)) targets.push({ socketPath: p });
  }
  for (const target of targets) {
    const ok = await new Promise<boolean>((resolve) => {
      const req = httpRequest({ ...target, path: '/_ping', method: 'GET', timeout: 2000 }, (res) => {
        res.resume();
        resolve(res.statusCode === 200);
      });
      req.on('timeout', () => req.destroy());
      req.on('error', () => resolve(false));
      req.end();
    });
    if (ok) return true;
  }
  return false;
}

async function tryTestcontainers(): Promise<TestRedis | null> {
  try {
    const { RedisContainer } = await import('@testcontainers/redis');
    const started = await withTimeout(new RedisContainer('redis:7-alpine').start(), 60_000);
    return { url: started.getConnectionUrl(), source: 'testcontainers', prefix: freshPrefix, stop: async () => void (await started.stop()) };
  } catch {
    // The socket exists but the engine does not answer (or cannot pull): fall through to redis-server.
    return null;
  }
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('timeout')), ms);
    p.then(
      (v) => (clearTimeout(t), resolve(v)),
      (e: unknown) => (clearTimeout(t), reject(e instanceof Error ? e : new Error(String(e)))),
    );
  });
}

/** What {@link useTestRedis} gives a test file: its Redis, an admin client, and things to close after each test. */
export interface RedisFixture {
  readonly redis: TestRedis;
  readonly admin: ReturnType<typeof createClient>;
  /** Closed after each test, the last opened first. */
  readonly opened: { close(): Promise<void> }[];
}

/**
 * Registers the hooks every in-process Redis test file needs: a Redis for the file (see
 * {@link getTestRedis}), an admin client to inspect it, and what each test opened closed after it.
 * Read the fields inside tests and hooks, not at module level (they are set in beforeAll).
 */
export function useTestRedis(): RedisFixture {
  const fx = { opened: [] as { close(): Promise<void> }[] } as { redis: TestRedis; admin: ReturnType<typeof createClient>; opened: { close(): Promise<void> }[] };
  beforeAll(async () => {
    fx.redis = await getTestRedis();
    fx.admin = createClient({ url: fx.redis.url });
    fx.admin.on('error', () => undefined);
    await fx.admin.connect();
  });
  afterAll(async () => {
    await fx.admin?.close();
    await fx.redis?.stop();
  });
  afterEach(async () => {
    await Promise.allSettled(fx.opened.splice(0).reverse().map((o) => o.close()));
  });
  return fx;
}
