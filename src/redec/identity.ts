import { createHash } from 'node:crypto';

/** Longest `id` used as the identity as it is (UTF-16 units); a longer one is hashed. */
export const MAX_IDENTITY_LENGTH = 256;

/**
 * A record's identity (CONTRACT.md, REDEC reconciliation): its `id` when that is a string, else a
 * hash of the record (SHA-256 of its JSON with keys sorted at every depth, hex, 32 characters), so
 * the same record listed twice, members in any order, has the same identity. An `id` longer than
 * {@link MAX_IDENTITY_LENGTH} is replaced by the same kind of hash, of the id alone (what a
 * run holds per record, and the `reconcile_<identity>` event id, stay small whatever the service sends).
 *
 * @example identityOf({ id: 'nrq_1' }) // 'nrq_1'
 */
export function identityOf(record: Readonly<Record<string, unknown>>): string {
  const id = record.id;
  if (typeof id === 'string' && id !== '') return id.length <= MAX_IDENTITY_LENGTH ? id : hash(`id:${id}`);
  return hash(canonical(record));
}

const hash = (text: string): string => createHash('sha256').update(text).digest('hex').slice(0, 32);

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
