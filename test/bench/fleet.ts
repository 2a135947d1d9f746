/**
 * `npm run bench -- fleet` (or BENCH_ONLY=fleet): what a fleet costs one Redis. N real replicas
 * (`serve` processes, BENCH_FLEET_REPLICAS, default 30) share one `redis-server` with emulated
 * readers beyond them: processes that each run up to 100 replicas' worth of the sidecar's own
 * fleet wiring (`startFleet`: the connection, its health check, the invalidation log and its
 * subscription, and the dedup settlements' subscription), so they cost Redis exactly what a
 * replica's Redis side costs, on the code as it is. At each size (BENCH_FLEET_EMULATED, emulated
 * readers added in steps, default `0,100,300`) it counts, from Redis itself (`INFO commandstats`,
 * `INFO stats`, `INFO cpu`):
 * - idle: commands per second (and scripts) over BENCH_FLEET_IDLE_S (default 60) with nothing sent;
 * - per revocation: commands, bytes out and Redis CPU for BENCH_FLEET_EVENTS (default 100)
 *   revocation webhooks sent at BENCH_FLEET_RATE a second (default 10) to the real replicas in
 *   turn, less what the idle fleet costs over the same time;
 * - per revocation in a storm: the same for BENCH_FLEET_STORM_EVENTS (default 300) sent in bursts
 *   of BENCH_FLEET_STORM_BURST (default 20) at once, BENCH_FLEET_STORM_RATE a second (default 100),
 *   as a bulk revocation job arrives: Redis then handles several appends per turn of its event
 *   loop and writes each subscriber once for all of them, which a busy Redis always does;
 * - per webhook: the same for events that revoke nothing (deduplication alone);
 * and, at the real N alone, how long a revocation takes to reach every replica (BENCH_FLEET_SAMPLES,
 * default 100): each replica has the user's ALLOW cached, the revocation is delivered to one of
 * them, and every replica is asked again and again until none answers from its cache.
 * And what a publish to 1,000 subscribers costs Redis (BENCH_FLEET_FANOUT subscribers, default
 * 1,000, of a process of their own, a nudge-sized message), alone in a turn of Redis' event loop
 * and 50 to a turn: Redis writes each subscriber once per turn, whatever it holds for it, so a busy
 * Redis pays the second. Then the line a linear fit of those sizes gives for N = 1,000, and the
 * revocation rate at which one Redis core would be busy all the time: the revocation's own cost
 * (the fit's intercept: its scripts) plus its fan-outs at the batched price, and, for comparison,
 * the evenly spaced revocations' cost as measured (where each subscriber is written once per
 * revocation, and where the code before this one read the log once per replica, which no turn
 * batches).
 *
 * The load generator and the prober are processes of their own (this file with `--drive`), as are
 * the emulated readers (`--emulate`), Redis, the upstream and the app; this process only starts
 * them and reads Redis' counters. Alone: `npm run build && node --import tsx test/bench/fleet.ts`.
 * BENCH_FLEET_LOG_DIR keeps each real replica's log there.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHmac, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { createClient } from '@redis/client';
import { Pool } from 'undici';
import { spawnRedisServer, type SpawnedRedis } from '../helpers/redis.js';
import { fmt, freePort, machineLine, startChild, stopChild } from './lib.js';

const SELF = fileURLToPath(import.meta.url);
const CLI = process.env.BENCH_CLI ?? fileURLToPath(new URL('../../dist/cli.js', import.meta.url));
const BASELINES = fileURLToPath(new URL('./baselines.mjs', import.meta.url));
const SECRET = 'whsec_fleetbenchfleetbenchfleetbench';
const API_KEY = 'bench-key';
const CONFIG_KEY = 'marketing-email';
const PREFIX = 'bench-fleet:';
const REAL = Number(process.env.BENCH_FLEET_REPLICAS ?? 30);
const EMULATED = (process.env.BENCH_FLEET_EMULATED ?? '0,100,300').split(',').map((s) => Number(s.trim()));
const IDLE_S = Number(process.env.BENCH_FLEET_IDLE_S ?? 60);
const EVENTS = Number(process.env.BENCH_FLEET_EVENTS ?? 100);
const RATE = Number(process.env.BENCH_FLEET_RATE ?? 10);
const STORM_EVENTS = Number(process.env.BENCH_FLEET_STORM_EVENTS ?? 300);
const STORM_BURST = Number(process.env.BENCH_FLEET_STORM_BURST ?? 20);
const STORM_RATE = Number(process.env.BENCH_FLEET_STORM_RATE ?? 100);
const SAMPLES = Number(process.env.BENCH_FLEET_SAMPLES ?? 100);
const FANOUT = Number(process.env.BENCH_FLEET_FANOUT ?? 1000);
/** Where each real replica's log goes (BENCH_FLEET_LOG_DIR; not kept by default). */
const LOG_DIR = process.env.BENCH_FLEET_LOG_DIR;
/** Publishes per turn of Redis' loop in the batched fan-out measurement. */
const FANOUT_BATCH = 50;
/** Emulated readers per process. */
const PER_EMULATOR = 100;
/** The size the model speaks for. */
const MODEL_N = 1000;
const clock = (): number => performance.timeOrigin + performance.now();

/** What Redis says it did: every command (scripts' own calls included), bytes, CPU. */
interface RedisCounters {
  readonly at: number;
  /** Calls by command name, the bench's own (INFO, CONFIG, CLIENT) left out. */
  readonly calls: Record<string, number>;
  readonly bytesOut: number;
  readonly bytesIn: number;
  /** used_cpu_user + used_cpu_sys (s). */
  readonly cpuS: number;
}

const OWN = new Set(['info', 'config', 'client', 'hello', 'ping']);

/** The one command the bench sends Redis while it measures. */
interface Admin {
  sendCommand(args: string[]): Promise<unknown>;
}

async function counters(admin: Admin): Promise<RedisCounters> {
  const text = String(await admin.sendCommand(['INFO', 'all']));
  const calls: Record<string, number> = {};
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) if (!OWN.has(m[1]!.split('|')[0]!)) calls[m[1]!] = Number(m[2]);
  const num = (k: string): number => Number(new RegExp(`^${k}:([\\d.]+)`, 'm').exec(text)?.[1] ?? Number.NaN);
  return { at: clock(), calls, bytesOut: num('total_net_output_bytes'), bytesIn: num('total_net_input_bytes'), cpuS: num('used_cpu_user') + num('used_cpu_sys') };
}

interface Delta {
  readonly s: number;
  readonly commands: number;
  readonly scripts: number;
  readonly bytesOut: number;
  readonly bytesIn: number;
  readonly cpuS: number;
  readonly byCommand: Record<string, number>;
}

function delta(a: RedisCounters, b: RedisCounters): Delta {
  const byCommand: Record<string, number> = {};
  for (const [k, v] of Object.entries(b.calls)) if (v - (a.calls[k] ?? 0) > 0) byCommand[k] = v - (a.calls[k] ?? 0);
  const commands = Object.values(byCommand).reduce((s, v) => s + v, 0);
  const scripts = (byCommand.evalsha ?? 0) + (byCommand.eval ?? 0);
  return { s: (b.at - a.at) / 1000, commands, scripts, bytesOut: b.bytesOut - a.bytesOut, bytesIn: b.bytesIn - a.bytesIn, cpuS: b.cpuS - a.cpuS, byCommand };
}

/** One size of the fleet. */
export interface FleetPoint {
  readonly n: number;
  readonly real: number;
  readonly idle: { readonly commandsPerS: number; readonly scriptsPerS: number; readonly cpuPct: number; readonly byCommandPerS: Record<string, number> };
  readonly revocation: PerEvent;
  readonly storm: PerEvent;
  readonly webhook: PerEvent;
}

interface PerEvent {
  readonly sent: number;
  readonly acknowledged: number;
  /** Those not answered 200, by status and error. */
  readonly refused: Record<string, number>;
  readonly commands: number;
  readonly scripts: number;
  readonly bytesOut: number;
  readonly bytesIn: number;
  /** Redis CPU per event (µs). */
  readonly cpuUs: number;
  readonly byCommand: Record<string, number>;
}

export interface Propagation {
  readonly replicas: number;
  readonly samples: number;
  /** From the revocation's 200 until the last replica stopped answering from its cache (ms). */
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  /** The same from the delivery's sending. */
  readonly fromSentP50Ms: number;
  readonly fromSentP99Ms: number;
  /** Samples in which some replica still answered from its cache after 10 s. */
  readonly unfinished: number;
  /** Deliveries answered otherwise than 200 (sent again), by status and error. */
  readonly refused: Record<string, number>;
  /** What the nudges came to on the real replicas (`consent_sidecar_cache_invalidation_nudges_total`, all of them; none before it existed). */
  readonly nudges: Record<string, number>;
}

/** What one publish costs Redis with `subscribers` listening (µs of its CPU), alone in its turn and `FANOUT_BATCH` to a turn. */
export interface Fanout {
  readonly subscribers: number;
  readonly aloneUs: number;
  readonly batchedUs: number;
}

export interface FleetModel {
  readonly n: number;
  /** The fit's intercept: what a revocation costs Redis besides its fan-outs (µs). */
  readonly fixedUs: number;
  readonly idleCommandsPerS: number;
  readonly idleCpuPct: number;
  readonly revocationCommands: number;
  readonly revocationBytesOut: number;
  readonly revocationCpuUs: number;
  readonly stormCommands: number;
  readonly stormCpuUs: number;
  readonly webhookCommands: number;
  readonly webhookBytesOut: number;
  readonly webhookCpuUs: number;
  /**
   * Revocations a second at which one Redis core is busy all the time (idle load included): the
   * fixed cost and two fan-outs at the batched price (the nudge, and the settlement every webhook
   * announces to every replica).
   */
  readonly saturatingRevocationsPerS: number;
  /** The same with one fan-out: settlements announced only to a replica that waits (branch `dedup`). */
  readonly saturatingOneFanoutPerS: number;
  /** The same from the evenly spaced revocations' CPU as measured (no two in one turn of Redis' loop). */
  readonly saturatingSpacedRevocationsPerS: number;
  /** How long a turn of Redis' loop takes at 500 revocations a second, by the same figures (ms). */
  readonly turnAt500Ms: number;
}

export interface FleetBench {
  readonly machine: string;
  readonly machineAfter: string;
  readonly redisVersion: string;
  readonly points: readonly FleetPoint[];
  readonly propagation: Propagation;
  readonly fanout: Fanout;
  readonly model: FleetModel;
}

// --- children ----------------------------------------------------------------------------------

/**
 * `--emulate <redisUrl> <count>`: `count` replicas' Redis side, each through the sidecar's own
 * fleet wiring with its own connection, as a passthrough replica with webhooks runs it.
 */
async function runEmulator(redisUrl: string, count: number): Promise<void> {
  const { loadServeConfig } = await import('../../src/config/index.js');
  const { startFleet } = await import('../../src/assembly/fleet.js');
  const { createRegistry, silentLogger } = await import('../../src/observability/index.js');
  const config = loadServeConfig(
    { 'upstream-url': 'http://127.0.0.1:9', 'api-key': API_KEY, 'app-webhook-url': 'http://127.0.0.1:9/hooks', 'webhook-secret': SECRET, 'redis-url': redisUrl, 'redis-key-prefix': PREFIX },
    {},
  );
  const noop = { revokeUser: () => 0, revokeAll: () => 0 };
  const fleets: { close(): Promise<void> }[] = [];
  for (let i = 0; i < count; i++) {
    const fleet = await startFleet(config, { local: noop, registry: createRegistry({ defaultMetrics: false }), logger: silentLogger(), now: Date.now });
    // The webhook wing's shared dedup listens for settlements on every replica.
    await fleet.shared!.claims.onSettled(() => undefined);
    fleets.push(fleet);
  }
  process.once('SIGTERM', () => void Promise.allSettled(fleets.map((f) => f.close())).then(() => process.exit(0)));
  process.stdout.write('ready\n');
}

interface EventsJob {
  readonly kind: 'events';
  readonly webhookUrls: readonly string[];
  readonly revoke: boolean;
  readonly count: number;
  /** Events a second, sent `burst` at once. */
  readonly rate: number;
  readonly burst: number;
  readonly tag: string;
}

interface FanoutJob {
  readonly kind: 'fanout';
  readonly redisUrl: string;
  readonly subscribers: number;
}

interface PropagationJob {
  readonly kind: 'propagation';
  readonly webhookUrls: readonly string[];
  readonly decisionUrls: readonly string[];
  readonly samples: number;
}

/** A delivery signed here, as the service signs it (not by our code). */
function signed(id: string, type: string, data: Record<string, unknown>): { headers: Record<string, string>; body: string } {
  const body = JSON.stringify({ id, sequence: 1, type, occurredAt: Date.now(), data });
  const ts = String(Math.floor(Date.now() / 1000));
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'x-service-event-id': id,
      'x-service-delivery-id': `dlv_${id}`,
      'x-service-timestamp': ts,
      'x-service-signature': `v1=${createHmac('sha256', SECRET).update(`${ts}.${body}`).digest('hex')}`,
    },
  };
}

/** The answer's status, and for one that is not 200 its `error` (what the service would see). */
async function deliver(pool: Pool, id: string, revokeUser: string | null): Promise<{ status: number; error?: string }> {
  const { headers, body } = revokeUser
    ? signed(id, 'consent_action.created', { action: 'revoke', userReference: revokeUser, configKey: CONFIG_KEY })
    : signed(id, 'redec.access.occurred', { customer_tenant_id: 'nobody' });
  const res = await pool.request({ method: 'POST', path: '/webhooks', headers, body });
  const text = await res.body.text();
  if (res.statusCode === 200) return { status: 200 };
  let error = 'unreadable';
  try {
    error = String((JSON.parse(text) as { error?: unknown }).error);
  } catch {
    // not JSON
  }
  return { status: res.statusCode, error };
}

/** What an events job got: how many were answered 200, and the others by status and error. */
interface EventsReport {
  readonly sent: number;
  readonly acknowledged: number;
  readonly refused: Record<string, number>;
}

/** Events at a fixed rate (`burst` at a time) to the replicas in turn; prints how they were answered. */
async function runEvents(job: EventsJob): Promise<EventsReport> {
  const pools = job.webhookUrls.map((u) => new Pool(u, { connections: Math.max(4, job.burst) }));
  const start = clock();
  const pending: Promise<{ status: number; error?: string }>[] = [];
  for (let k = 0; k < job.count; k++) {
    const wait = start + (Math.floor(k / job.burst) * job.burst * 1000) / job.rate - clock();
    if (wait > 0) await sleep(wait);
    const id = `evt_${job.tag}_${k}`;
    pending.push(deliver(pools[k % pools.length]!, id, job.revoke ? `user-${job.tag}-${k}` : null).catch((err: unknown) => ({ status: 0, error: (err as Error).message })));
  }
  const answers = await Promise.all(pending);
  await Promise.all(pools.map((p) => p.close()));
  const refused: Record<string, number> = {};
  for (const a of answers) if (a.status !== 200) refused[`${a.status} ${a.error}`] = (refused[`${a.status} ${a.error}`] ?? 0) + 1;
  return { sent: job.count, acknowledged: answers.filter((a) => a.status === 200).length, refused };
}

async function check(pool: Pool, user: string): Promise<string> {
  const res = await pool.request({
    method: 'POST',
    path: '/v1/authorization/check',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ userReference: user, configKey: CONFIG_KEY }),
  });
  await res.body.dump();
  return res.statusCode === 200 ? String(res.headers['x-consent-decision-source']) : `status ${res.statusCode}`;
}

/**
 * Per sample: every replica caches the user's ALLOW; the revocation goes to one replica; every
 * replica is asked until none answers from its cache. Prints each sample's times.
 */
async function runPropagation(job: PropagationJob): Promise<{ fromAck: number[]; fromSent: number[]; unfinished: number; refused: Record<string, number> }> {
  const refused: Record<string, number> = {};
  const decisions = job.decisionUrls.map((u) => new Pool(u, { connections: 2 }));
  const hooks = job.webhookUrls.map((u) => new Pool(u, { connections: 1 }));
  const fromAck: number[] = [];
  const fromSent: number[] = [];
  let unfinished = 0;
  for (let k = 0; k < job.samples; k++) {
    const user = `prop-${randomBytes(4).toString('hex')}-${k}`;
    await Promise.all(decisions.map((p) => check(p, user)));
    const cached = await Promise.all(decisions.map((p) => check(p, user)));
    if (cached.some((s) => s !== 'cache')) throw new Error(`a replica did not cache the ALLOW: ${cached.join(', ')}`);
    const purgedAt: (number | undefined)[] = decisions.map(() => undefined);
    const sentAt = clock();
    let ackAt: number | undefined;
    // As the service does: a delivery not answered 200 is sent again (at once, here), until one is.
    const acked = (async () => {
      for (let attempt = 1; ; attempt++) {
        const a = await deliver(hooks[k % hooks.length]!, `evt_prop_${user}`, user);
        if (a.status === 200) return void (ackAt = clock());
        refused[`${a.status} ${a.error}`] = (refused[`${a.status} ${a.error}`] ?? 0) + 1;
        if (attempt >= 10) throw new Error(`the revocation was answered ${a.status} ${a.error} ${attempt} times`);
      }
    })();
    const deadline = sentAt + 10_000;
    // Each replica asked on its own, again 2 ms after each answer from its cache: one slow to
    // answer holds up no other's measurement.
    await Promise.all(
      decisions.map(async (p, i) => {
        while (clock() < deadline) {
          if ((await check(p, user)) !== 'cache') return void (purgedAt[i] = clock());
          await sleep(2);
        }
      }),
    );
    await acked;
    if (purgedAt.some((t) => t === undefined)) {
      unfinished++;
      continue;
    }
    const last = Math.max(...(purgedAt as number[]));
    fromAck.push(Math.max(0, last - ackAt!));
    fromSent.push(last - sentAt);
    await sleep(50);
  }
  await Promise.all([...decisions, ...hooks].map((p) => p.close()));
  return { fromAck, fromSent, unfinished, refused };
}

/**
 * `subscribers` connections listening on a channel of their own, and a publisher: Redis' CPU per
 * publish of a nudge-sized message, one per turn of its loop, then `FANOUT_BATCH` to a turn (one
 * MULTI), each batch published once the one before reached every subscriber.
 */
async function runFanout(job: FanoutJob): Promise<Omit<Fanout, 'subscribers'>> {
  const channel = `{${PREFIX}}fanout`;
  let got = 0;
  const clients: { destroy(): void }[] = [];
  for (let i = 0; i < job.subscribers; i++) {
    const c = createClient({ url: job.redisUrl });
    c.on('error', () => undefined);
    await c.connect();
    await c.subscribe(channel, () => void got++);
    clients.push(c);
  }
  const pub = createClient({ url: job.redisUrl });
  pub.on('error', () => undefined);
  await pub.connect();
  const cpu = async (): Promise<number> => {
    const text = String(await pub.sendCommand(['INFO', 'cpu']));
    const n = (k: string): number => Number(new RegExp(`^${k}:([\\d.]+)`, 'm').exec(text)?.[1]);
    return n('used_cpu_user') + n('used_cpu_sys');
  };
  const message = JSON.stringify(['e1', '1767225600000-12', '1767225600000-11', randomBytes(18).toString('base64url'), 'user', 'user-0123456789', randomBytes(16).toString('hex')]);
  const usPerPublish = async (batch: number, rounds: number): Promise<number> => {
    const c0 = await cpu();
    for (let r = 0; r < rounds; r++) {
      const multi = pub.multi();
      for (let j = 0; j < batch; j++) multi.addCommand(['PUBLISH', channel, message]);
      await multi.exec();
      const want = (r + 1) * batch * job.subscribers;
      while (got < want) await sleep(1);
    }
    const used = (await cpu()) - c0;
    got = 0;
    return (used * 1e6) / (batch * rounds);
  };
  await usPerPublish(1, 5);
  const aloneUs = await usPerPublish(1, 100);
  const batchedUs = await usPerPublish(FANOUT_BATCH, 10);
  pub.destroy();
  for (const c of clients) c.destroy();
  return { aloneUs, batchedUs };
}

/** Runs this file as a child with `args`; resolves its last stdout line as JSON. */
function child<T>(args: string[]): Promise<T> {
  return new Promise((resolve, reject) => {
    const c = spawn(process.execPath, ['--import', 'tsx', SELF, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    c.stdout.on('data', (b: Buffer) => (out += b.toString()));
    c.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`bench child ${args[0]} exited ${code}`));
      try {
        resolve(JSON.parse(out.trim().split('\n').pop()!) as T);
      } catch {
        reject(new Error(`bench child ${args[0]}: unreadable report (${out.length} bytes)`));
      }
    });
  });
}

/** Starts an emulator process with `count` replicas; resolves once all are started. */
function emulator(redisUrl: string, count: number): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const c = spawn(process.execPath, ['--import', 'tsx', SELF, '--emulate', redisUrl, String(count)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    c.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      if (out.includes('ready')) resolve(c);
    });
    c.once('exit', (code) => reject(new Error(`emulator exited ${code} before it was ready`)));
  });
}

// --- the bench ---------------------------------------------------------------------------------

/** `consent_sidecar_cache_invalidation_nudges_total` summed over the replicas, by outcome. */
async function nudgeOutcomes(admins: readonly string[]): Promise<Record<string, number>> {
  const sum: Record<string, number> = {};
  for (const url of admins) {
    const text = await (await fetch(`${url}/metrics`)).text();
    for (const m of text.matchAll(/^consent_sidecar_cache_invalidation_nudges_total\{outcome="([a-z_]+)"\} (\d+)/gm)) sum[m[1]!] = (sum[m[1]!] ?? 0) + Number(m[2]);
  }
  return sum;
}

const pct = (xs: readonly number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

/** Least-squares line through (x, y). */
function fit(points: readonly (readonly [number, number])[]): (x: number) => number {
  const n = points.length;
  if (n === 1) return (x) => (points[0]![1] / points[0]![0]) * x;
  const mx = points.reduce((s, [x]) => s + x, 0) / n;
  const my = points.reduce((s, [, y]) => s + y, 0) / n;
  const sxx = points.reduce((s, [x]) => s + (x - mx) ** 2, 0);
  const slope = points.reduce((s, [x, y]) => s + (x - mx) * (y - my), 0) / sxx;
  return (x) => my + slope * (x - mx);
}

export async function benchFleet(): Promise<FleetBench> {
  const machine = machineLine();
  const stops: (() => Promise<void>)[] = [];
  const redis: SpawnedRedis = await spawnRedisServer({ args: ['--save', '', '--appendonly', 'no', '--maxclients', '20000'] });
  stops.push(() => redis.stop());
  const admin = createClient({ url: redis.url });
  admin.on('error', () => undefined);
  await admin.connect();
  stops.push(async () => void admin.destroy());
  try {
    const redisVersion = /redis_version:(\S+)/.exec(String(await admin.sendCommand(['INFO', 'server'])))?.[1] ?? '?';
    const upPort = await freePort();
    const upstream = await startChild(process.execPath, [BASELINES, 'upstream', String(upPort), String(Date.now() + 86_400_000)], `http://127.0.0.1:${upPort}/ready`);
    stops.push(() => stopChild(upstream));
    const appPort = await freePort();
    const app = await startChild(process.execPath, [BASELINES, 'app', String(appPort)], `http://127.0.0.1:${appPort}/ready`);
    stops.push(() => stopChild(app));

    // The real replicas, a few at a time (a busy machine starts 30 node processes slowly).
    const replicas: { decision: string; webhook: string; admin: string }[] = [];
    for (let i = 0; i < REAL; i += 5) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(5, REAL - i) }, async () => {
          // A free port can be taken by another process before the replica binds it: new ports, again.
          for (let attempt = 1; ; attempt++) {
            const [d, w, a] = [await freePort(), await freePort(), await freePort()];
            try {
              const c = await startChild(
                process.execPath,
                [CLI, 'serve', '--upstream-url', `http://127.0.0.1:${upPort}`, '--api-key', API_KEY, '--listen', `127.0.0.1:${d}`, '--webhook-listen', `127.0.0.1:${w}`,
                  '--admin-listen', `127.0.0.1:${a}`, '--app-webhook-url', `http://127.0.0.1:${appPort}/hooks`, '--webhook-secret', SECRET,
                  '--redis-url', redis.url, '--redis-key-prefix', PREFIX, '--log-level', 'warn'],
                `http://127.0.0.1:${a}/readyz`,
                undefined,
                LOG_DIR === undefined ? undefined : join(LOG_DIR, `replica-${w}.log`),
              );
              stops.push(() => stopChild(c));
              return { decision: `http://127.0.0.1:${d}`, webhook: `http://127.0.0.1:${w}`, admin: `http://127.0.0.1:${a}` };
            } catch (err) {
              if (attempt >= 3) throw err;
            }
          }
        }),
      );
      replicas.push(...batch);
    }
    const webhookUrls = replicas.map((r) => r.webhook);
    await sleep(5000); // every replica connected, subscribed and past its first reads

    // Propagation at the real N, nothing else on Redis.
    const prop = await child<{ fromAck: number[]; fromSent: number[]; unfinished: number; refused: Record<string, number> }>([
      '--drive',
      JSON.stringify({ kind: 'propagation', webhookUrls, decisionUrls: replicas.map((r) => r.decision), samples: SAMPLES } satisfies PropagationJob),
    ]);
    const propagation: Propagation = {
      replicas: REAL,
      samples: prop.fromAck.length,
      p50Ms: pct(prop.fromAck, 50),
      p99Ms: pct(prop.fromAck, 99),
      maxMs: Math.max(...prop.fromAck),
      fromSentP50Ms: pct(prop.fromSent, 50),
      fromSentP99Ms: pct(prop.fromSent, 99),
      unfinished: prop.unfinished,
      refused: prop.refused,
      nudges: await nudgeOutcomes(replicas.map((r) => r.admin)),
    };

    const fanout: Fanout = { subscribers: FANOUT, ...(await child<Omit<Fanout, 'subscribers'>>(['--drive', JSON.stringify({ kind: 'fanout', redisUrl: redis.url, subscribers: FANOUT } satisfies FanoutJob)])) };
    console.log(`  a publish to ${fmt(FANOUT)} subscribers: ${fmt(fanout.aloneUs)} µs of Redis CPU alone in its turn, ${fmt(fanout.batchedUs)} µs ${FANOUT_BATCH} to a turn`);

    const points: FleetPoint[] = [];
    let emulated = 0;
    for (const [step, target] of EMULATED.entries()) {
      while (emulated < target) {
        const count = Math.min(PER_EMULATOR, target - emulated);
        const e = await emulator(redis.url, count);
        stops.push(() => stopChild(e));
        emulated += count;
      }
      await sleep(5000);
      const n = REAL + emulated;
      const i0 = await counters(admin);
      await sleep(IDLE_S * 1000);
      const i1 = await counters(admin);
      const idle = delta(i0, i1);
      const idlePerS = (x: number): number => x / idle.s;
      const perEvent = async (revoke: boolean, count: number, rate: number, burst: number, tag: string): Promise<PerEvent> => {
        const a = await counters(admin);
        const sent = await child<EventsReport>(['--drive', JSON.stringify({ kind: 'events', webhookUrls, revoke, count, rate, burst, tag: `${tag}${step}` } satisfies EventsJob)]);
        // Every replica's reads after the last nudge are done: Redis is back to its idle pace.
        for (let deadline = clock() + 60_000; clock() < deadline; ) {
          const before = await counters(admin);
          await sleep(1000);
          if (delta(before, await counters(admin)).commands <= idlePerS(idle.commands) * 1.5 + 5) break;
        }
        const d = delta(a, await counters(admin));
        const less = (x: number, idleX: number): number => (x - idlePerS(idleX) * d.s) / sent.sent;
        const byCommand: Record<string, number> = {};
        for (const [k, v] of Object.entries(d.byCommand)) byCommand[k] = less(v, idle.byCommand[k] ?? 0);
        return {
          ...sent,
          commands: less(d.commands, idle.commands),
          scripts: less(d.scripts, idle.scripts),
          bytesOut: less(d.bytesOut, idle.bytesOut),
          bytesIn: less(d.bytesIn, idle.bytesIn),
          cpuUs: less(d.cpuS, idle.cpuS) * 1e6,
          byCommand,
        };
      };
      const revocation = await perEvent(true, EVENTS, RATE, 1, 'rev');
      const storm = await perEvent(true, STORM_EVENTS, STORM_RATE, STORM_BURST, 'storm');
      const webhook = await perEvent(false, EVENTS, RATE, 1, 'hook');
      const byCommandPerS: Record<string, number> = {};
      for (const [k, v] of Object.entries(idle.byCommand)) byCommandPerS[k] = v / idle.s;
      points.push({ n, real: REAL, idle: { commandsPerS: idlePerS(idle.commands), scriptsPerS: idlePerS(idle.scripts), cpuPct: idlePerS(idle.cpuS) * 100, byCommandPerS }, revocation, storm, webhook });
      console.log(`  measured N = ${n}: ${pointLine(points.at(-1)!)}`);
    }

    const at = (f: (p: FleetPoint) => number, n = MODEL_N): number => fit(points.map((p) => [p.n, f(p)] as const))(n);
    const idleCpuPct = Math.max(0, at((p) => p.idle.cpuPct));
    const revocationCpuUs = at((p) => p.revocation.cpuUs);
    const stormCpuUs = at((p) => p.storm.cpuUs);
    const fixedUs = Math.max(0, at((p) => p.revocation.cpuUs, 0));
    // A publish's cost per subscriber, batched and alone, scaled to the model's N.
    const batchedUs = (fanout.batchedUs / fanout.subscribers) * MODEL_N;
    const aloneUs = (fanout.aloneUs / fanout.subscribers) * MODEL_N;
    const busy = 1 - idleCpuPct / 100;
    const perRevocationUs = fixedUs + 2 * batchedUs;
    const model: FleetModel = {
      n: MODEL_N,
      fixedUs,
      idleCommandsPerS: at((p) => p.idle.commandsPerS),
      idleCpuPct,
      revocationCommands: at((p) => p.revocation.commands),
      revocationBytesOut: at((p) => p.revocation.bytesOut),
      revocationCpuUs,
      stormCommands: at((p) => p.storm.commands),
      stormCpuUs,
      webhookCommands: at((p) => p.webhook.commands),
      webhookBytesOut: at((p) => p.webhook.bytesOut),
      webhookCpuUs: at((p) => p.webhook.cpuUs),
      saturatingRevocationsPerS: (busy * 1e6) / perRevocationUs,
      saturatingOneFanoutPerS: (busy * 1e6) / (fixedUs + batchedUs),
      saturatingSpacedRevocationsPerS: (busy * 1e6) / revocationCpuUs,
      // Each turn writes every subscriber once (2 × (alone − batched)) and does the work of the
      // revocations that arrived during the turn before: T = writes / (1 − rate × per revocation).
      turnAt500Ms: (2 * (aloneUs - batchedUs)) / 1000 / Math.max(1e-9, busy - (500 * perRevocationUs) / 1e6),
    };
    return { machine, machineAfter: machineLine(), redisVersion, points, propagation, fanout, model };
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
  }
}

function pointLine(p: FleetPoint): string {
  return [
    `idle ${fmt(p.idle.commandsPerS, 1)} cmd/s (${fmt(p.idle.scriptsPerS, 1)} scripts/s, ${fmt(p.idle.commandsPerS / p.n, 3)} per replica, Redis CPU ${fmt(p.idle.cpuPct, 1)} %)`,
    `revocation ${fmt(p.revocation.commands, 1)} cmd (${fmt(p.revocation.scripts, 1)} scripts), ${fmt(p.revocation.bytesOut / 1024, 1)} kB out, ${fmt(p.revocation.cpuUs)} µs CPU (${p.revocation.acknowledged}/${p.revocation.sent} 200)`,
    `in a storm ${fmt(p.storm.commands, 1)} cmd, ${fmt(p.storm.cpuUs)} µs CPU (${p.storm.acknowledged}/${p.storm.sent} 200${Object.keys(p.storm.refused).length ? `; ${Object.entries(p.storm.refused).map(([k, v]) => `${v} ${k}`).join(', ')}` : ''})`,
    `webhook ${fmt(p.webhook.commands, 1)} cmd, ${fmt(p.webhook.bytesOut / 1024, 1)} kB out, ${fmt(p.webhook.cpuUs)} µs CPU (${p.webhook.acknowledged}/${p.webhook.sent} 200)`,
  ].join('; ');
}

export function fleetLines(r: FleetBench): string[] {
  const row = (cells: string[]): string => `| ${cells.join(' | ')} |`;
  const lines = [
    `Fleet on one Redis (redis-server ${r.redisVersion}; ${r.points[0]?.real ?? 0} real replicas, the rest emulated; idle over ${IDLE_S} s; ${EVENTS} events per row at ${RATE}/s; the storm ${STORM_EVENTS} revocations, ${STORM_BURST} at once, ${STORM_RATE}/s)`,
    `  before: ${r.machine}`,
    `  after:  ${r.machineAfter}`,
    row(['N', 'idle commands/s (scripts/s)', 'per idle replica', 'commands per revocation', 'bytes out per revocation', 'Redis CPU per revocation', 'in a storm: commands, CPU', 'commands per webhook', 'bytes out per webhook', 'Redis CPU per webhook']),
    row(['---', '---', '---', '---', '---', '---', '---', '---', '---', '---']),
  ];
  for (const p of r.points) {
    lines.push(
      row([
        String(p.n),
        `${fmt(p.idle.commandsPerS, 1)} (${fmt(p.idle.scriptsPerS, 1)})`,
        fmt(p.idle.commandsPerS / p.n, 3),
        fmt(p.revocation.commands, 1),
        `${fmt(p.revocation.bytesOut / 1024, 1)} k`,
        `${fmt(p.revocation.cpuUs)} µs`,
        `${fmt(p.storm.commands, 1)}, ${fmt(p.storm.cpuUs)} µs`,
        fmt(p.webhook.commands, 1),
        `${fmt(p.webhook.bytesOut / 1024, 1)} k`,
        `${fmt(p.webhook.cpuUs)} µs`,
      ]),
    );
  }
  const m = r.model;
  lines.push(
    row([
      `${fmt(m.n)} (model)`,
      fmt(m.idleCommandsPerS, 0),
      fmt(m.idleCommandsPerS / m.n, 3),
      fmt(m.revocationCommands, 0),
      `${fmt(m.revocationBytesOut / 1024, 0)} k`,
      `${fmt(m.revocationCpuUs)} µs`,
      `${fmt(m.stormCommands, 0)}, ${fmt(m.stormCpuUs)} µs`,
      fmt(m.webhookCommands, 0),
      `${fmt(m.webhookBytesOut / 1024, 0)} k`,
      `${fmt(m.webhookCpuUs)} µs`,
    ]),
  );
  const p = r.propagation;
  lines.push(
    `  a publish to ${fmt(r.fanout.subscribers)} subscribers: ${fmt(r.fanout.aloneUs)} µs of Redis CPU alone in its turn of the loop, ${fmt(r.fanout.batchedUs)} µs ${FANOUT_BATCH} to a turn`,
    `  model, N = ${fmt(m.n)}: idle Redis CPU ${fmt(m.idleCpuPct, 1)} % of a core; a revocation's own cost (the fit's intercept) ${fmt(m.fixedUs)} µs; one Redis core saturates at ${fmt(m.saturatingRevocationsPerS)} revocations/s (that and two fan-outs at the batched price: the nudge and the dedup settlement), ${fmt(m.saturatingOneFanoutPerS)}/s with one (settlements only to waiters), ${fmt(m.saturatingSpacedRevocationsPerS)}/s at the evenly spaced cost as measured; at 500/s a turn of Redis' loop takes about ${fmt(m.turnAt500Ms, 1)} ms`,
    `  propagation to all ${p.replicas} real replicas (${p.samples} revocations${p.unfinished ? `, ${p.unfinished} NOT everywhere within 10 s` : ''}${Object.keys(p.refused).length ? `; deliveries sent again after ${Object.entries(p.refused).map(([k, v]) => `${v} ${k}`).join(', ')}` : ''}): from the 200 p50 ${fmt(p.p50Ms, 1)} ms, p99 ${fmt(p.p99Ms, 1)} ms, max ${fmt(p.maxMs, 1)} ms; from the delivery sent p50 ${fmt(p.fromSentP50Ms, 1)} ms, p99 ${fmt(p.fromSentP99Ms, 1)} ms${Object.keys(p.nudges).length ? `; nudges ${Object.entries(p.nudges).map(([k, v]) => `${k} ${v}`).join(', ')}` : ''}`,
  );
  return lines;
}

// --- entry -------------------------------------------------------------------------------------

if (process.argv[1] === SELF) {
  const [mode, a, b] = process.argv.slice(2);
  const print = (v: unknown): Promise<void> => new Promise((resolve) => process.stdout.write(`${JSON.stringify(v)}\n`, () => resolve()));
  if (mode === '--emulate') {
    await runEmulator(a!, Number(b));
  } else if (mode === '--drive') {
    const job = JSON.parse(a!) as EventsJob | PropagationJob | FanoutJob;
    await print(job.kind === 'events' ? await runEvents(job) : job.kind === 'fanout' ? await runFanout(job) : await runPropagation(job));
    process.exit(0);
  } else {
    const r = await benchFleet();
    console.log(fleetLines(r).join('\n'));
    process.exit(0);
  }
}
