/**
 * `npm run chaos`: three real `serve` replicas on one real `redis-server` (AOF, `appendfsync
 * always`), or on a master, two replicas and three sentinels (`--topology sentinel`), or a cluster
 * of three masters with a replica each (`--topology cluster`), the simulator as the consent service, a recording app per replica; a sender that
 * behaves like the service (signs, delivers to a random replica, sometimes two at once, retries
 * until 200); a seeded nemesis (SIGKILL a replica, restart Redis, SIGKILL Redis, SIGSTOP Redis,
 * with Sentinel a failover, an app failing or hanging); revocations measured until every replica denies; then, once faults stop and
 * everything drains, a checker: lost, duplicated (by cause), stranded, revocation propagation.
 * Both delivery modes, passthrough then queue. Exit 1 when a mode fails (see checker.failures).
 *
 * Flags (or variables): --events N (CHAOS_EVENTS, 2000 per mode), --duration-s S
 * (CHAOS_DURATION_S, 60: how long events are sent and faults made), --seed N (CHAOS_SEED, random;
 * printed), --drain-s S (CHAOS_DRAIN_S, 120: the most the drain may take), --modes
 * passthrough,queue (CHAOS_MODES), --topology single|sentinel|cluster (CHAOS_TOPOLOGY, single), --dir PATH (CHAOS_DIR: replica logs and timelines; a fresh
 * directory under the system's temporary one).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { check, failures, type ModeReport } from './checker.js';
import { Fleet, type Mode } from './fleet.js';
import { Rng, until } from './lib.js';
import { TOPOLOGIES, type Topology } from './topology.js';
import { Nemesis } from './nemesis.js';
import { details, table } from './report.js';
import { RevocationProber } from './revocations.js';
import { Sender } from './sender.js';

interface Options {
  readonly events: number;
  readonly durationMs: number;
  readonly seed: number;
  readonly drainMs: number;
  readonly modes: Mode[];
  readonly topology: Topology;
  readonly dir: string;
}

function options(): Options {
  const { values } = parseArgs({
    options: { events: { type: 'string' }, 'duration-s': { type: 'string' }, seed: { type: 'string' }, 'drain-s': { type: 'string' }, modes: { type: 'string' }, topology: { type: 'string' }, dir: { type: 'string' } },
  });
  const num = (v: string | undefined, env: string, fallback: number): number => {
    const n = Number(v ?? process.env[env] ?? fallback);
    if (!Number.isFinite(n) || n < 0) throw new Error(`${env}: expected a number, got ${v ?? process.env[env]}`);
    return n;
  };
  const modes = (values.modes ?? process.env.CHAOS_MODES ?? 'passthrough,queue').split(',') as Mode[];
  if (modes.some((m) => m !== 'passthrough' && m !== 'queue')) throw new Error(`--modes: passthrough and/or queue, got ${modes.join(',')}`);
  const topology = (values.topology ?? process.env.CHAOS_TOPOLOGY ?? 'single') as Topology;
  if (!TOPOLOGIES.includes(topology)) throw new Error(`--topology: ${TOPOLOGIES.join(' or ')}, got ${topology}`);
  const dir = values.dir ?? process.env.CHAOS_DIR ?? mkdtempSync(join(tmpdir(), 'consent-sidecar-chaos-'));
  mkdirSync(dir, { recursive: true });
  return {
    events: num(values.events, 'CHAOS_EVENTS', 2000),
    durationMs: num(values['duration-s'], 'CHAOS_DURATION_S', 60) * 1000,
    seed: num(values.seed, 'CHAOS_SEED', Math.floor(Math.random() * 2 ** 31)) >>> 0,
    drainMs: num(values['drain-s'], 'CHAOS_DRAIN_S', 120) * 1000,
    modes,
    topology,
    dir,
  };
}

/** Every acknowledged event reached an app, nothing is being retried, and (queue mode) Redis holds nothing more. */
async function drainedNow(fleet: Fleet, sender: Sender): Promise<boolean> {
  if (sender.inFlight > 0) return false;
  const reached = new Set(fleet.apps.flatMap((a) => a.received.filter((r) => (r.status ?? 200) < 300).map((r) => r.id)));
  for (const e of sender.events.values()) if (e.ackAt !== undefined && !reached.has(e.id)) return false;
  if (fleet.mode === 'passthrough') return true;
  const left = await fleet.queueLeft();
  return left.waiting.length + left.streamEntries + left.delayed === 0;
}

const began = Date.now();
/** A progress line, with the time since the run began. */
const progress = (line: string): void => console.log(`[+${((Date.now() - began) / 1000).toFixed(1)} s] ${line}`);

async function runMode(mode: Mode, o: Options, rng: Rng): Promise<ModeReport> {
  progress(`${mode}: starting Redis (${o.topology}), the simulator, 3 replicas and their apps`);
  const startedAt = Date.now();
  const fleet = await Fleet.start(mode, o.dir, o.topology);
  try {
    for (const r of fleet.replicas) {
      if (!(await until(async () => (await r.metric('consent_sidecar_redis_up')) === 1, Date.now() + 30_000))) throw new Error(`${mode}: a replica never saw Redis up`);
    }
    const sender = new Sender(fleet, rng.fork(1));
    const nemesis = new Nemesis(fleet, rng.fork(2));
    const prober = new RevocationProber(fleet, sender, rng.fork(3));
    const endAt = Date.now() + o.durationMs;
    progress(`${mode}: sending ${o.events} events over ${o.durationMs / 1000} s with faults (logs in ${o.dir})`);
    await Promise.all([sender.run(o.events, o.durationMs), nemesis.run(endAt), prober.run(endAt)]);

    const drainStart = Date.now();
    progress(`${mode}: faults over (${nemesis.faults.length}), ${sender.inFlight} event(s) still being retried; draining`);
    const drained = await until(() => drainedNow(fleet, sender), drainStart + o.drainMs, 200);
    const drainMs = Date.now() - drainStart;
    progress(`${mode}: ${drained ? 'drained' : 'drain deadline passed'} after ${(drainMs / 1000).toFixed(1)} s`);
    await sender.giveUp(Date.now());
    const left = mode === 'queue' ? await fleet.queueLeft() : undefined;
    const decidedAlone = fleet.decidedAlone(startedAt);
    const report = check({ mode, topology: o.topology, events: sender.events, apps: fleet.apps, faults: nemesis.faults, revocations: prober.results, crashes: fleet.crashes, left, drainMs, drained, decidedAlone });
    writeTimeline(o, fleet, sender, nemesis, prober, report);
    return report;
  } finally {
    await fleet.close();
    progress(`${mode}: stopped`);
  }
}

/** Everything that happened, for reading a finding afterwards: `<dir>/<mode>-timeline.json`. */
function writeTimeline(o: Options, fleet: Fleet, sender: Sender, nemesis: Nemesis, prober: RevocationProber, report: ModeReport): void {
  const arrivals = fleet.apps.flatMap((a, app) => a.received.map((r) => ({ id: r.id, app, at: r.at, status: r.status })));
  const events = [...sender.events.values()].map(({ body: _body, ...e }) => ({ ...e, arrivals: arrivals.filter((a) => a.id === e.id) }));
  const file = join(o.dir, `${fleet.mode}-timeline.json`);
  writeFileSync(file, JSON.stringify({ seed: o.seed, faults: nemesis.faults, revocations: prober.results, report, events }, null, 1));
}

function machine(): string {
  const [one, five] = loadavg();
  return `${cpus().length} cores, load ${one!.toFixed(2)} (1 min) / ${five!.toFixed(2)} (5 min)`;
}

function redisVersion(): string {
  try {
    return /v=(\S+)/.exec(execFileSync('redis-server', ['--version'], { encoding: 'utf8' }))?.[1] ?? '?';
  } catch {
    return '?';
  }
}

async function main(): Promise<number> {
  const o = options();
  const rng = new Rng(o.seed);
  console.log(`chaos: seed ${o.seed} (repeat with --seed ${o.seed} or CHAOS_SEED=${o.seed}); ${o.events} events per mode over ${o.durationMs / 1000} s; modes ${o.modes.join(', ')}`);
  console.log(`machine at start: ${machine()}; node ${process.version}; redis-server ${redisVersion()} (AOF, appendfsync always); topology ${o.topology}`);
  const reports: ModeReport[] = [];
  for (const [i, mode] of o.modes.entries()) reports.push(await runMode(mode, o, rng.fork(100 + i)));
  console.log(`\nchaos: seed ${o.seed}, ${o.events} events per mode over ${o.durationMs / 1000} s, 3 replicas; machine at end: ${machine()}\n`);
  console.log(table(reports));
  const more = details(reports);
  if (more !== '') console.log(`\n${more}`);
  console.log(`\nreplica logs and timelines: ${o.dir}`);
  return reports.some((r) => failures(r).length > 0) ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err);
    process.exit(2);
  },
);
