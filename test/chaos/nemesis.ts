import { FORWARD_TIMEOUT_MS, type Fleet } from './fleet.js';
import { sleep, until, type Rng, type Window } from './lib.js';

export const FAULT_KINDS = ['replica-kill', 'redis-restart', 'redis-kill', 'redis-stall', 'redis-failover', 'app-fail', 'app-hang'] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/** One fault and its window: from the moment it was made to the moment everything was back. */
export interface Fault extends Window {
  readonly kind: FaultKind;
  /** The replica (or its app) it hit; undefined for Redis. */
  readonly target?: number;
  /** replica-kill: when its process was gone (its exit seen), to tell a forward done just before the death. */
  readonly at: number;
}

/** How long an app hangs each request in a hang: past the replicas' forward timeout. */
export const HANG_MS = FORWARD_TIMEOUT_MS + 1000;

/**
 * One fault at a time, on a seeded schedule: each round is every kind in a shuffled order (Redis
 * stalls twice), with 0.5–2 s of calm between faults. Durations: a replica is down 0.2–1.5 s before
 * it is started again; Redis is restarted with SIGTERM (AOF keeps its data) and started at once,
 * or killed with SIGKILL (no shutdown: what it acknowledged is on disk, `appendfsync always`) and
 * started at once; frozen with SIGSTOP for 0.3–3 s; with Sentinel, the master killed (SIGKILL)
 * until the sentinels promote a replica, then started again; an app answers 503, or hangs past the
 * forward timeout, for 1–4 s. Redis faults hit the node that is the master at the time.
 */
export class Nemesis {
  readonly faults: Fault[] = [];

  constructor(
    private readonly fleet: Fleet,
    private readonly rng: Rng,
  ) {}

  /** Makes faults until `endAt` (epoch ms); the last one is healed before it returns. */
  async run(endAt: number): Promise<void> {
    const round: FaultKind[] = ['replica-kill', 'redis-restart', 'redis-kill', 'redis-stall', 'redis-stall', 'app-fail', 'app-hang'];
    if (this.fleet.redis.failover) round.push('redis-failover', 'redis-failover');
    for (;;) {
      for (const kind of this.rng.shuffle(round)) {
        await sleep(this.rng.between(500, 2000));
        if (Date.now() >= endAt) return;
        this.faults.push(await this.make(kind));
      }
    }
  }

  private async make(kind: FaultKind): Promise<Fault> {
    const target = this.rng.int(this.fleet.size);
    const start = Date.now();
    switch (kind) {
      case 'replica-kill':
        return this.killReplica(target);
      case 'redis-restart':
        await this.fleet.redis.restart();
        return { kind, start, at: start, end: Date.now() };
      case 'redis-kill':
        await this.fleet.redis.kill();
        return { kind, start, at: start, end: Date.now() };
      case 'redis-stall':
        await this.fleet.redis.stall(this.rng.between(300, 3000));
        return { kind, start, at: start, end: Date.now() };
      case 'redis-failover':
        await this.fleet.redis.failover!();
        return { kind, start, at: start, end: Date.now() };
      case 'app-fail':
      case 'app-hang':
        return this.appFault(kind, target);
    }
  }

  private async killReplica(target: number): Promise<Fault> {
    const downMs = this.rng.between(200, 1500);
    const start = Date.now();
    await this.fleet.kill(target);
    const at = Date.now();
    await sleep(downMs);
    // Started again until it is up (a start can fail on a loaded machine; it is tried again).
    const up = await until(
      async () => {
        await this.fleet.revive(target);
        return true;
      },
      Date.now() + 60_000,
      500,
    );
    if (!up) throw new Error(`replica ${target} could not be started again within 60 s`);
    return { kind: 'replica-kill', target, start, at, end: Date.now() };
  }

  private async appFault(kind: 'app-fail' | 'app-hang', target: number): Promise<Fault> {
    const app = this.fleet.apps[target]!;
    const start = Date.now();
    if (kind === 'app-fail') app.status = 503;
    else app.delayMs = HANG_MS;
    await sleep(this.rng.between(1000, 4000));
    app.status = 200;
    app.delayMs = 0;
    // Requests that came in the window are still answered up to HANG_MS later (the checker allows for it).
    return { kind, target, start, at: start, end: Date.now() };
  }
}
