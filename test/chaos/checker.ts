import type { RecordingApp } from '../helpers/serve-process.js';
import type { Crash, Mode, QueueLeft } from './fleet.js';
import { FORWARD_TIMEOUT_MS, LEASE_MS } from './fleet.js';
import { overlaps, quantile, type Window } from './lib.js';
import type { Fault, FaultKind } from './nemesis.js';
import type { RevocationResult } from './revocations.js';
import type { SentEvent } from './sender.js';
import type { Topology } from './topology.js';

export const CAUSES = ['dedup-fallback', 'redis-stall', 'redis-restart', 'redis-kill', 'redis-failover', 'replica-kill', 'app-fail/hang', 'app-late', 'none'] as const;
/** Redis faults: copies in their windows are theirs, and an event they strand fails the run. */
export const REDIS_FAULTS: readonly FaultKind[] = ['redis-stall', 'redis-restart', 'redis-kill', 'redis-failover'];
/**
 * Causes whose duplicates fail the run. Never a failover: what the old master had not yet passed
 * to a replica (a dedup accept, a queue acknowledgement or delivered marker) is gone with it, so
 * an event may reach the app once more; counted and shown. With Sentinel or a cluster any Redis
 * fault longer than the failure detection (1 s here) is a failover too, and with Sentinel a node
 * started again with its old role answers READONLY until the sentinels reconfigure it (each
 * replica then falls back to its own dedup): only a duplicate with no fault near fails those runs.
 */
export function failingCauses(topology: Topology): readonly Cause[] {
  return topology === 'single' ? ['redis-stall', 'redis-restart', 'redis-kill', 'none'] : ['none'];
}
export type Cause = (typeof CAUSES)[number];

/** A replica dead this soon after its app took a copy: the forward was done, the accept not recorded. */
const KILL_AFTER_FORWARD_MS = 2000;
/**
 * Passthrough: a copy that reached the app this long after the second its delivery was signed in
 * (the forward timeout, plus a second for the dedup claim and the scheduler) came after its replica
 * had given up and answered 503: an app too slow, which on a loaded machine needs no nemesis.
 */
const LATE_AFTER_SIGNED_MS = 1000 + FORWARD_TIMEOUT_MS + 1000;
/** Queue mode: an event pending when a Redis fault ended must reach an app within this. */
const STRANDED_AFTER_MS = 2000;

export interface Arrival {
  readonly app: number;
  readonly at: number;
  readonly accepted: boolean;
  /** Passthrough: it came after its replica had given up (see LATE_AFTER_SIGNED_MS). */
  readonly late?: boolean;
  /** Queue mode: the forward's `x-consent-sidecar-attempt` (1 the first). */
  readonly attempt?: number;
}

export interface ModeReport {
  readonly mode: Mode;
  readonly topology: Topology;
  readonly sent: number;
  readonly acked: number;
  readonly unacked: string[];
  readonly lost: string[];
  /** Epoch ms of the first event: the origin of the times the details print. */
  readonly t0: number;
  readonly duplicated: { id: string; copies: number; cause: Cause; arrivals: { app: number; at: number }[] }[];
  readonly byCause: Record<Cause, number>;
  /** Queue mode: late after a Redis fault (unexplained), and what was left in Redis. */
  readonly stranded?: { late: { id: string; lateMs: number }[]; lateExplained: number; left: QueueLeft };
  readonly revocations: {
    measured: number;
    skipped: number;
    maxMs?: number;
    /** The same, measured from when the delivery that got the 200 was sent (includes a Redis stall). */
    maxFromSentMs?: number;
    p99Ms?: number;
    over1s: number;
    allowAgain: number;
    /** Each one over 1 s, with the faults its measurement overlapped. */
    slow: { eventId: string; ms: number; during: FaultKind[] }[];
  };
  readonly faults: Fault[];
  readonly crashes: Crash[];
  /** How the sender's attempts were answered. */
  readonly answers: Record<string, number>;
  readonly drainMs: number;
  readonly drained: boolean;
}

export interface CheckInput {
  readonly mode: Mode;
  /** Default single. */
  readonly topology?: Topology;
  readonly events: ReadonlyMap<string, SentEvent>;
  readonly apps: readonly RecordingApp[];
  readonly faults: readonly Fault[];
  readonly revocations: readonly RevocationResult[];
  readonly crashes: readonly Crash[];
  readonly left?: QueueLeft;
  readonly drainMs: number;
  readonly drained: boolean;
  /**
   * Passthrough: for each event, the replicas that claimed it alone (Redis silent longer than the
   * lease: the contract's fallback to per-replica dedup), from their `webhook_dedup_decided_alone` lines.
   */
  readonly decidedAlone?: ReadonlyMap<string, ReadonlySet<number>>;
}

/** Everything the apps received, by event id, in order of arrival. */
function arrivalsOf(apps: readonly RecordingApp[], mode: Mode): Map<string, Arrival[]> {
  const out = new Map<string, Arrival[]>();
  apps.forEach((app, i) => {
    for (const r of app.received) {
      const list = out.get(r.id) ?? [];
      // In queue mode the timestamp is the one stored at ingress: it says nothing of this forward.
      const signedAt = mode === 'passthrough' ? Number(r.headers?.['x-service-timestamp']) * 1000 : Number.NaN;
      const attempt = Number(r.headers?.['x-consent-sidecar-attempt']);
      list.push({ app: i, at: r.at, accepted: (r.status ?? 200) < 300, late: r.at - signedAt > LATE_AFTER_SIGNED_MS, ...(attempt > 0 ? { attempt } : {}) });
      out.set(r.id, list);
    }
  });
  for (const list of out.values()) list.sort((a, b) => a.at - b.at);
  return out;
}

/**
 * Why a second copy was accepted. Mechanisms first: the first copy's app took it while hanging
 * past the forward timeout (the replica gave up and the service, or the queue, retried), or the
 * first copy reached its app after its replica had given up (passthrough: an app too slow, or a
 * machine too loaded), or the first copy's replica was killed right after its app took it (the
 * accept, or the queue's delivered marker, never written).
 * Then a copy forwarded by a replica that decided the event alone (`alone`: Redis was silent for
 * longer than the lease, and the contract has each replica fall back to its own dedup, counted).
 * Else the Redis fault whose window (extended by the lease) the copies span, nearest first; then
 * any app fault; else none.
 */
export function causeOf(copies: readonly Arrival[], faults: readonly Fault[], alone: ReadonlySet<number> = new Set()): Cause {
  const [c1, c2] = copies as [Arrival, Arrival];
  const hit = (f: Fault): boolean => f.target === c1.app;
  // A hang first: a replica killed while its app hangs had not got the 2xx yet.
  if (faults.some((f) => f.kind === 'app-hang' && hit(f) && c1.at >= f.start && c1.at <= f.end)) return 'app-fail/hang';
  if (c1.late) return 'app-late';
  // Queue mode: a later attempt of the same entry means its worker saw the first one fail (it did
  // not get the app's 2xx in time): the app took it after the replica had given up.
  if (c1.attempt !== undefined && c2.attempt !== undefined && c2.attempt > c1.attempt) return 'app-late';
  if (faults.some((f) => f.kind === 'replica-kill' && hit(f) && c1.at <= f.at && c1.at >= f.at - KILL_AFTER_FORWARD_MS)) return 'replica-kill';
  if (alone.has(c1.app) || alone.has(c2.app)) return 'dedup-fallback';
  const span: Window = { start: c1.at, end: c2.at };
  const extended = (f: Fault): Window => ({ start: f.start - 500, end: f.end + LEASE_MS + 1000 });
  const near = faults.filter((f) => REDIS_FAULTS.includes(f.kind) && overlaps(span, extended(f)));
  // A fault that began after both copies had arrived did not cause them: one that had begun is
  // preferred (a stall starting just after a failover's copies is not their cause), then the nearest.
  const begun = near.filter((f) => f.start <= c2.at);
  const redis = (begun.length > 0 ? begun : near).sort((a, b) => Math.abs(a.start - c1.at) - Math.abs(b.start - c1.at));
  if (redis[0]) return redis[0].kind as Cause;
  if (faults.some((f) => (f.kind === 'app-fail' || f.kind === 'app-hang') && overlaps(span, extended(f)))) return 'app-fail/hang';
  if (faults.some((f) => f.kind === 'replica-kill' && overlaps(span, extended(f)))) return 'replica-kill';
  return 'none';
}

/**
 * Queue mode: acknowledged events still waiting when a Redis fault ended that reached no app
 * within 2 s of its end (or of their acknowledgement, if later). A replica killed or an app hung
 * in between explains a delay (a dead consumer's entries wait for the lease; hung forwards hold
 * the worker), counted apart.
 */
export function lateAfterRedis(events: readonly SentEvent[], arrivals: Map<string, Arrival[]>, faults: readonly Fault[]) {
  const redis = faults.filter((f) => REDIS_FAULTS.includes(f.kind));
  const late: { id: string; lateMs: number }[] = [];
  let lateExplained = 0;
  for (const e of events) {
    const first = arrivals.get(e.id)?.[0]?.at;
    if (e.ackAt === undefined || first === undefined) continue;
    const crossed = redis.filter((f) => f.end >= e.ackAt! && f.end < first);
    if (crossed.length === 0) continue;
    const ref = Math.max(e.ackAt, ...redis.filter((f) => f.start <= first).map((f) => f.end));
    const lateMs = first - ref;
    if (lateMs <= STRANDED_AFTER_MS) continue;
    const waited: Window = { start: e.ackAt, end: first };
    const explained = faults.some((f) => (f.kind === 'replica-kill' || f.kind === 'app-hang') && overlaps(waited, { start: f.start, end: f.end + LEASE_MS }));
    if (explained) lateExplained++;
    else late.push({ id: e.id, lateMs });
  }
  return { late, lateExplained };
}

function revocationSummary(results: readonly RevocationResult[], faults: readonly Fault[]): ModeReport['revocations'] {
  const measured = results.filter((r) => r.propagationMs !== undefined).map((r) => r.propagationMs!);
  const slow = results
    .filter((r) => r.propagationMs !== undefined && r.propagationMs > 1000)
    .map((r) => {
      const window: Window = { start: r.from!, end: r.from! + Math.min(r.propagationMs!, 60_000) };
      return { eventId: r.eventId, ms: r.propagationMs!, during: faults.filter((f) => overlaps(window, f)).map((f) => f.kind) };
    });
  return {
    slow,
    measured: measured.length,
    skipped: results.length - measured.length,
    maxMs: measured.length > 0 ? Math.max(...measured) : undefined,
    maxFromSentMs: measured.length > 0 ? Math.max(...results.filter((r) => r.fromSentMs !== undefined).map((r) => r.fromSentMs!)) : undefined,
    p99Ms: quantile(measured, 0.99),
    over1s: measured.filter((ms) => ms > 1000).length,
    allowAgain: results.reduce((n, r) => n + (r.allowAgain ?? 0), 0),
  };
}

export function check(input: CheckInput): ModeReport {
  const arrivals = arrivalsOf(input.apps, input.mode);
  const events = [...input.events.values()];
  const acked = events.filter((e) => e.ackAt !== undefined);
  const accepted = (id: string): Arrival[] => (arrivals.get(id) ?? []).filter((a) => a.accepted);
  const duplicated = events
    .map((e) => ({ id: e.id, copies: accepted(e.id) }))
    .filter((d) => d.copies.length >= 2)
    .map((d) => ({ id: d.id, copies: d.copies.length, cause: causeOf(d.copies, input.faults, input.decidedAlone?.get(d.id)), arrivals: d.copies.map(({ app, at }) => ({ app, at })) }));
  const byCause = Object.fromEntries(CAUSES.map((c) => [c, duplicated.filter((d) => d.cause === c).length])) as Record<Cause, number>;
  const answers: Record<string, number> = {};
  for (const e of events) for (const [k, n] of Object.entries(e.answers)) answers[k] = (answers[k] ?? 0) + n;
  return {
    mode: input.mode,
    topology: input.topology ?? 'single',
    t0: Math.min(...events.map((e) => e.createdAt)),
    sent: events.length,
    acked: acked.length,
    unacked: events.filter((e) => e.ackAt === undefined).map((e) => e.id),
    lost: acked.filter((e) => accepted(e.id).length === 0).map((e) => e.id),
    duplicated,
    byCause,
    ...(input.left ? { stranded: { ...lateAfterRedis(acked, arrivals, input.faults), left: input.left } } : {}),
    revocations: revocationSummary(input.revocations, input.faults),
    faults: [...input.faults],
    crashes: [...input.crashes],
    answers,
    drainMs: input.drainMs,
    drained: input.drained,
  };
}

/** Why a mode's run fails, empty when it passes. */
export function failures(r: ModeReport): string[] {
  const out: string[] = [];
  if (r.lost.length > 0) out.push(`${r.lost.length} acknowledged event(s) lost: ${r.lost.slice(0, 5).join(', ')}`);
  if (r.unacked.length > 0) out.push(`${r.unacked.length} event(s) never acknowledged: ${r.unacked.slice(0, 5).join(', ')}`);
  for (const cause of failingCauses(r.topology)) {
    const ids = r.duplicated.filter((d) => d.cause === cause).map((d) => d.id);
    if (ids.length > 0) out.push(`${ids.length} duplicate(s) caused by ${cause}: ${ids.slice(0, 5).join(', ')}`);
  }
  if (r.revocations.over1s > 0) out.push(`${r.revocations.over1s} revocation(s) took over 1 s (max ${r.revocations.maxMs} ms)`);
  if (r.revocations.allowAgain > 0) out.push(`${r.revocations.allowAgain} ALLOW(s) answered again after a DENY`);
  if (r.crashes.length > 0) out.push(`${r.crashes.length} replica crash(es)`);
  const left = r.stranded?.left;
  if (left && left.waiting.length + left.deadLetters + left.streamEntries + left.delayed > 0) out.push(`queue not empty at the end: ${JSON.stringify({ ...left, waiting: left.waiting.length })}`);
  return out;
}

export const faultCounts = (faults: readonly Fault[]): Record<FaultKind, number> =>
  faults.reduce((acc, f) => ({ ...acc, [f.kind]: (acc[f.kind] ?? 0) + 1 }), {} as Record<FaultKind, number>);
