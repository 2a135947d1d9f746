import { createHash } from 'node:crypto';

/**
 * A record's identity (CONTRACT.md, REDEC reconciliation): its `id` when that is a string, else a
 * hash of the record (SHA-256 of its JSON with keys sorted at every depth, hex, 32 characters), so
 * the same record listed twice, members in any order, has the same identity.
 *
 * @example identityOf({ id: 'nrq_1' }) // 'nrq_1'
 */
export function identityOf(record: Readonly<Record<string, unknown>>): string {
  if (typeof record.id === 'string' && record.id !== '') return record.id;
  return createHash('sha256').update(canonical(record)).digest('hex').slice(0, 32);
}

function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (typeof v === 'object' && v !== null) {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}
