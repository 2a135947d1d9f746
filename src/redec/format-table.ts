import { printable } from '../lib/printable.js';
import type { NotificationRequirementItem } from './list-pending.js';

const COLUMNS = ['notificationRequirementId', 'redecConsentId', 'notificationReason', 'deliveryResponsibility', 'status', 'createdAt'];

/** Epoch seconds below this, epoch milliseconds above (1e11 s is the year 5138; 1e11 ms is 1973). */
const SECONDS_BELOW = 1e11;

/** A time member (`…At`, `…_at`) holding an epoch number, printed as ISO 8601 UTC. */
function timeCell(column: string, v: unknown): string | undefined {
  if (!/(At|_at)$/.test(column) || typeof v !== 'number' || !Number.isFinite(v) || v < 0) return undefined;
  const d = new Date(v < SECONDS_BELOW ? v * 1000 : v);
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString();
}

/**
 * A plain-text table of requirements; times (members ending in `At` or `_at` holding epoch seconds
 * or milliseconds) are printed as ISO 8601. Columns are the simulator's field names; a service that names
 * them otherwise gets its own keys as columns (the document does not show the record's fields).
 */
export function formatTable(items: readonly NotificationRequirementItem[]): string {
  const present = COLUMNS.filter((c) => items.some((i) => c in i));
  const columns = present.length > 0 ? present : [...new Set(items.flatMap((i) => Object.keys(i)))];
  // The service's values, printed as one line each: a control character could rewrite the terminal.
  const cell = (v: unknown): string => printable(v === undefined || v === null ? '' : typeof v === 'string' ? v : JSON.stringify(v));
  const rows = [columns.map(printable), ...items.map((i) => columns.map((c) => timeCell(c, i[c]) ?? cell(i[c])))];
  const widths = columns.map((_c, k) => Math.max(...rows.map((r) => (r[k] ?? '').length)));
  return rows.map((r) => r.map((v, k) => v.padEnd(widths[k] ?? 0)).join('  ').trimEnd()).join('\n');
}
