import type { NotificationRequirementItem } from './list-pending.js';

const COLUMNS = ['notificationRequirementId', 'redecConsentId', 'notificationReason', 'deliveryResponsibility', 'status', 'createdAt'];

/**
 * A plain-text table of requirements. Columns are the simulator's field names; a service that names
 * them otherwise gets its own keys as columns (the document does not show the record's fields).
 */
export function formatTable(items: readonly NotificationRequirementItem[]): string {
  const present = COLUMNS.filter((c) => items.some((i) => c in i));
  const columns = present.length > 0 ? present : [...new Set(items.flatMap((i) => Object.keys(i)))];
  const cell = (v: unknown): string =>
    v === undefined || v === null ? '' : typeof v === 'string' ? v : JSON.stringify(v);
  const rows = [columns, ...items.map((i) => columns.map((c) => cell(i[c])))];
  const widths = columns.map((_c, k) => Math.max(...rows.map((r) => (r[k] ?? '').length)));
  return rows.map((r) => r.map((v, k) => v.padEnd(widths[k] ?? 0)).join('  ').trimEnd()).join('\n');
}
