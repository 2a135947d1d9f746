import { createClient } from '@redis/client';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
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

/** A `redis-server` process of our own, which a test can stop and start again on the same port. */
export interface SpawnedRedis {
  readonly url: string;
  readonly port: number;
  /** Stops it (SIGTERM, then SIGKILL after 2 s); idempotent. */
  stop(): Promise<void>;
  /** Starts it again on the same port (empty: nothing is persisted). */
  start(): Promise<void>;
}

/** Path of `redis-server`, or null. */
export function redisServerBinary(): string | null {
  for (const p of ['/usr/bin/redis-server', '/usr/local/bin/redis-server', '/usr/sbin/redis-server']) if (existsSync(p)) return p;
  const found = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' });
  return found.status === 0 && found.stdout.trim() !== '' ? found.stdout.trim() : null;
}

/** Spawns `redis-server --port <free> --save "" --appendonly no`; fails with how to install it when absent. */
export async function spawnRedisServer(): Promise<SpawnedRedis> {
  const binary = redisServerBinary();
  if (!binary) throw new Error(HOW_TO_GET_ONE);
  const port = await freePort();
  let child: ChildProcess | undefined;

  const start = async (): Promise<void> => {
    if (child) return;
    const c = spawn(binary, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'pipe'] });
    child = c;
    await new Promise<void>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error(`redis-server on port ${port} not ready within 10 s:\n${out}`)), 10_000);
      c.stdout!.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes('Ready to accept connections')) {
          clearTimeout(timer);
          resolve();
        }
      });
      c.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`redis-server exited ${code} before ready:\n${out}`));
      });
    });
    c.stdout!.resume();
    c.stderr!.resume();
  };

  const stop = async (): Promise<void> => {
    const c = child;
    child = undefined;
    if (!c || c.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      const kill = setTimeout(() => c.kill('SIGKILL'), 2000);
      c.once('exit', () => {
        clearTimeout(kill);
        resolve();
      });
      c.kill('SIGTERM');
    });
  };

  await start();
  return { url: `redis://127.0.0.1:${port}`, port, stop, start };
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
