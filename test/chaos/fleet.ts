import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startSimulator, type SimulatorHandle } from '../../src/simulator/index.js';
import { RecordingApp, replicaFlags, ServeProcess } from '../helpers/serve-process.js';
import { adminOn } from '../helpers/redis.js';
import { startChaosRedis, type ChaosRedis, type Topology } from './topology.js';

export type Mode = 'passthrough' | 'queue';

/** `--webhook-forward-timeout-ms` of every replica (replicaFlags' value). */
export const FORWARD_TIMEOUT_MS = 2000;
/** The dedup lease and the queue's visibility timeout: the default, forward timeout + 5 s. */
export const LEASE_MS = FORWARD_TIMEOUT_MS + 5000;

/** A replica that exited without the nemesis asking it to. */
export interface Crash {
  readonly replica: number;
  readonly at: number;
  readonly lastLogLines: string[];
}

/** What is left of the queue in Redis. */
export interface QueueLeft {
  /** Event ids neither delivered nor dead-lettered. */
  readonly waiting: string[];
  readonly streamEntries: number;
  readonly delayed: number;
  readonly deadLetters: number;
}

/**
 * Everything a chaos run of one mode runs against: Redis (one `redis-server`, or a master, two
 * replicas and three sentinels; every data node with AOF on, `appendfsync always`, its own
 * directory), the simulator as the consent service, three real
 * `serve` replicas, each with its own recording app. Replica logs are appended to files in `dir`
 * (one per replica, every incarnation), so a finding can be read after the run.
 */
export class Fleet {
  readonly replicas: ServeProcess[] = [];
  readonly apps: RecordingApp[] = [];
  /** Whether the nemesis has replica i down on purpose. */
  readonly down: boolean[] = [];
  readonly crashes: Crash[] = [];
  private watchdog: NodeJS.Timeout | undefined;

  private constructor(
    readonly mode: Mode,
    readonly dir: string,
    readonly redis: ChaosRedis,
    readonly sim: SimulatorHandle,
    readonly prefix: string,
  ) {}

  static async start(mode: Mode, dir: string, topology: Topology = 'single', size = 3): Promise<Fleet> {
    const prefix = `chaos-${mode}:`;
    const redis = await startChaosRedis(topology, prefix);
    const sim = await startSimulator({ apiKey: 'chaos-key' });
    const fleet = new Fleet(mode, dir, redis, sim, prefix);
    try {
      for (let i = 0; i < size; i++) {
        const app = new RecordingApp();
        await app.up();
        fleet.apps.push(app);
        const extra: Record<string, string> = mode === 'queue' ? { 'webhook-delivery': 'queue' } : {};
        const flags = replicaFlags({ upstreamUrl: sim.url, apiKey: sim.apiKey, appUrl: app.url, redis: redis.flags, prefix: fleet.prefix, extra });
        // Debug: each event a replica deduplicates alone is a line (webhook_dedup_decided_alone).
        fleet.replicas.push(new ServeProcess({ ...flags, 'webhook-forward-timeout-ms': String(FORWARD_TIMEOUT_MS), 'log-level': 'debug' }));
        fleet.down.push(false);
      }
      await Promise.all(fleet.replicas.map((r) => r.start()));
    } catch (err) {
      await fleet.close();
      throw err;
    }
    fleet.watchdog = setInterval(() => fleet.watch(), 250);
    return fleet;
  }

  get size(): number {
    return this.replicas.length;
  }

  /** SIGKILL replica i (its log is saved first). */
  async kill(i: number): Promise<void> {
    this.down[i] = true;
    await this.replicas[i]!.kill();
    this.saveLog(i, 'killed by the nemesis (SIGKILL)');
  }

  /** Starts replica i again (on new ports). */
  async revive(i: number): Promise<void> {
    await this.replicas[i]!.start();
    this.down[i] = false;
  }

  /** A replica that died on its own is a crash: recorded, its log saved, and started again. */
  private watch(): void {
    this.replicas.forEach((r, i) => {
      if (this.down[i] || r.running) return;
      this.down[i] = true;
      const lastLogLines = r.logs().slice(-20).map((l) => JSON.stringify(l));
      this.crashes.push({ replica: i, at: Date.now(), lastLogLines });
      this.saveLog(i, 'exited on its own (crash)');
      void this.revive(i).catch(() => undefined);
    });
  }

  private saveLog(i: number, why: string): void {
    const lines = this.replicas[i]!.logs().map((l) => JSON.stringify(l));
    appendFileSync(join(this.dir, `${this.mode}-replica-${i}.log`), `${lines.join('\n')}\n# ${new Date().toISOString()} ${why}\n`);
  }

  /**
   * For each event, the replicas that deduplicated it alone (the contract's fallback when Redis has
   * been silent longer than the lease), from every incarnation's log since `sinceMs` (epoch ms).
   */
  decidedAlone(sinceMs: number): Map<string, Set<number>> {
    const out = new Map<string, Set<number>>();
    this.replicas.forEach((r, i) => {
      const file = join(this.dir, `${this.mode}-replica-${i}.log`);
      const saved = existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>) : [];
      for (const line of [...saved, ...r.logs()]) {
        if (line.event !== 'webhook_dedup_decided_alone' || !(Date.parse(String(line.time)) >= sinceMs)) continue;
        const id = String(line.eventId);
        if (!out.has(id)) out.set(id, new Set());
        out.get(id)!.add(i);
      }
    });
    return out;
  }

  /** What the queue still holds (queue mode), read from Redis directly. */
  async queueLeft(): Promise<QueueLeft> {
    const c = await adminOn(await this.redis.masterUrl());
    try {
      const k = (name: string): string => `{${this.prefix}}queue:${name}`;
      const waiting = (await c.sendCommand(['ZRANGE', k('born'), '0', '-1'])) as string[];
      const streamEntries = Number(await c.sendCommand(['XLEN', k('events')]));
      const delayed = Number(await c.sendCommand(['ZCARD', k('delayed')]));
      const deadLetters = Number(await c.sendCommand(['XLEN', k('dead')]));
      return { waiting, streamEntries, delayed, deadLetters };
    } finally {
      c.destroy();
    }
  }

  async close(): Promise<void> {
    clearInterval(this.watchdog);
    await Promise.all(
      this.replicas.map(async (r, i) => {
        this.down[i] = true;
        await r.stop();
        this.saveLog(i, 'stopped at the end of the run (SIGTERM)');
      }),
    );
    await Promise.allSettled(this.apps.map((a) => a.down()));
    await this.sim.close();
    await this.redis.close();
  }
}
