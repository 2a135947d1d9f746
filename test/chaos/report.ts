import { CAUSES, failingCauses, failures, faultCounts, type ModeReport } from './checker.js';
import { FAULT_KINDS } from './nemesis.js';

const LABEL_WIDTH = 54;
const COLUMN_WIDTH = 30;

function row(label: string, cells: string[]): string {
  // A cell wider than its column still leaves a space before the next one.
  return `${label.padEnd(LABEL_WIDTH)}${cells.map((c) => `${c} `.padEnd(COLUMN_WIDTH)).join('')}`.trimEnd();
}

const CAUSE_LABELS: Record<(typeof CAUSES)[number], string> = {
  'dedup-fallback': 'a fallback (Redis silent > the lease)',
  'redis-stall': 'a Redis stall',
  'redis-restart': 'a Redis restart',
  'redis-kill': 'a Redis kill (SIGKILL)',
  'redis-failover': 'a failover',
  'replica-kill': 'a replica kill',
  'app-fail/hang': 'an app failing or hanging',
  'app-late': 'an app slower than the timeout (load)',
  none: 'no fault',
};

const ms = (v: number | undefined): string => (v === undefined ? '-' : Number.isFinite(v) ? String(Math.round(v)) : 'never');

function strandedCell(r: ModeReport): string {
  if (!r.stranded) return 'n/a';
  const left = r.stranded.left;
  return `${r.stranded.late.length} / ${left.waiting.length + left.deadLetters}`;
}

function answersCell(r: ModeReport): string {
  const total = Object.values(r.answers).reduce((a, b) => a + b, 0);
  const ok = Object.entries(r.answers).filter(([k]) => k.startsWith('200')).reduce((a, [, n]) => a + n, 0);
  const errors = r.answers.error ?? 0;
  return `${ok} 200, ${total - ok - errors} 5xx, ${errors} conn`;
}

/** The table, one column per mode. */
export function table(reports: readonly ModeReport[]): string {
  const col = (f: (r: ModeReport) => string): string[] => reports.map(f);
  const lines = [
    row('', col((r) => r.mode)),
    row('events sent / acknowledged', col((r) => `${r.sent} / ${r.acked}`)),
    row('lost (acknowledged, never accepted)', col((r) => String(r.lost.length))),
    row('never acknowledged', col((r) => String(r.unacked.length))),
    row('duplicated (accepted by apps >= 2 times)', col((r) => String(r.duplicated.length))),
    ...CAUSES.map((c) => row(`  by ${CAUSE_LABELS[c]}`, col((r) => String(r.byCause[c])))),
    row('stranded: late > 2 s after Redis / left', col(strandedCell)),
    row('  late, explained by a kill or a hang', col((r) => (r.stranded ? String(r.stranded.lateExplained) : 'n/a'))),
    row('revocations measured (skipped)', col((r) => `${r.revocations.measured} (${r.revocations.skipped})`)),
    row('  propagation max / p99 (ms), from the 200', col((r) => `${ms(r.revocations.maxMs)} / ${ms(r.revocations.p99Ms)}`)),
    row('  max from the delivery sent (ms)', col((r) => ms(r.revocations.maxFromSentMs))),
    row('  over 1 s', col((r) => String(r.revocations.over1s))),
    row('faults: kill/restart/SIGKILL/stall/failover/fail/hang', col((r) => FAULT_KINDS.map((k) => faultCounts(r.faults)[k] ?? 0).join(' / '))),
    row('  redis stalls (s)', col(stallRange)),
    row('replica crashes', col((r) => String(r.crashes.length))),
    row('delivery attempts answered', col(answersCell)),
    row('drain (s)', col((r) => `${(r.drainMs / 1000).toFixed(1)}${r.drained ? '' : ' (deadline)'}`)),
    row('result', col((r) => (failures(r).length === 0 ? 'PASS' : 'FAIL'))),
  ];
  return lines.join('\n');
}

function stallRange(r: ModeReport): string {
  const d = r.faults.filter((f) => f.kind === 'redis-stall').map((f) => (f.end - f.start) / 1000);
  return d.length === 0 ? '-' : `${Math.min(...d).toFixed(1)}–${Math.max(...d).toFixed(1)}`;
}

/** Each failure, and for each duplicate its id, copies and cause (the evidence to look up in the run's files). */
export function details(reports: readonly ModeReport[]): string {
  const out: string[] = [];
  for (const r of reports) {
    for (const f of failures(r)) out.push(`${r.mode}: FAIL ${f}`);
    const rel = (t: number): string => `${((t - r.t0) / 1000).toFixed(3)} s`;
    const faultAt = (kind: string): string =>
      r.faults
        .filter((f) => f.kind === kind)
        .map((f) => `${rel(f.start)}–${rel(f.end)}`)
        .join(', ');
    // Duplicates of an allowed cause are in the timeline file; those that fail the run are shown with their evidence.
    for (const d of r.duplicated.filter((x) => failingCauses(r.topology).includes(x.cause)).slice(0, 20)) {
      const where = d.arrivals.map((a) => `app ${a.app} at ${rel(a.at)}`).join(', ');
      out.push(`${r.mode}: duplicate ${d.id}: ${where} (${d.cause}${d.cause === 'none' ? '' : `; ${d.cause} windows: ${faultAt(d.cause)}`})`);
    }
    for (const v of r.revocations.slow) out.push(`${r.mode}: revocation ${v.eventId} took ${ms(v.ms)} ms (faults meanwhile: ${v.during.join(', ') || 'none'})`);
    for (const v of r.stranded?.late.slice(0, 20) ?? []) out.push(`${r.mode}: stranded ${v.id} reached an app ${v.lateMs} ms after the Redis fault ended`);
    for (const c of r.crashes) out.push(`${r.mode}: replica ${c.replica} crashed at ${new Date(c.at).toISOString()}:\n  ${c.lastLogLines.join('\n  ')}`);
  }
  return out.join('\n');
}
