import type { RedisKeyspace } from './keyspace.js';

/** Owner segment of every queue key: `<prefix>queue:…` (reserved in {@link RedisKeyspace}). */
export const QUEUE_KEY_OWNER = 'queue';
/** The consumer group every replica's workers join (one consumer per process). */
export const QUEUE_GROUP = 'workers';

/** An event as the queue keeps it (JSON in the stream field `e`, the delayed set and dead letters). */
export interface StoredEvent {
  /** Envelope id. */
  readonly id: string;
  readonly type: string;
  /** Headers to forward, built at ingress. */
  readonly headers: Readonly<Record<string, string>>;
  /** Raw body, base64 (bytes forwarded unchanged). */
  readonly body: string;
  /** When the ingress (or a replay) put it on the queue (epoch ms); the horizon counts from here. */
  readonly acceptedAt: number;
  /** Forwards tried and not accepted so far. */
  readonly attempts: number;
  /** Why the last attempt failed (`app answered 500`, `no answer within 10000 ms`, …). */
  readonly lastError?: string;
  /** Dead letters only: when it was parked (epoch ms). */
  readonly deadAt?: number;
}

/** The names of the queue's keys (see queue-scripts.ts for what each holds). */
export class QueueKeys {
  readonly events: string;
  readonly delayed: string;
  readonly born: string;
  readonly dead: string;
  readonly wake: string;

  constructor(private readonly keyspace: RedisKeyspace) {
    this.events = keyspace.key(QUEUE_KEY_OWNER, 'events');
    this.delayed = keyspace.key(QUEUE_KEY_OWNER, 'delayed');
    this.born = keyspace.key(QUEUE_KEY_OWNER, 'born');
    this.dead = keyspace.key(QUEUE_KEY_OWNER, 'dead');
    this.wake = keyspace.channel(`${QUEUE_KEY_OWNER}:wake`);
  }

  delivered(eventId: string): string {
    return this.keyspace.key(QUEUE_KEY_OWNER, 'delivered', eventId);
  }
}

/** Parses a stored event; null when the JSON is not one (never trusted blindly, even from our Redis). */
export function decodeEvent(json: string): StoredEvent | null {
  let v: unknown;
  try {
    v = JSON.parse(json);
  } catch {
    return null;
  }
  const e = v as Partial<StoredEvent> | null;
  if (!e || typeof e !== 'object') return null;
  if (typeof e.id !== 'string' || typeof e.type !== 'string' || typeof e.body !== 'string') return null;
  if (typeof e.acceptedAt !== 'number' || typeof e.attempts !== 'number' || !e.headers || typeof e.headers !== 'object') return null;
  return e as StoredEvent;
}

/** One stream entry: its id and the event (null when the entry was deleted or is not ours). */
export interface StreamEntry {
  readonly entryId: string;
  readonly event: StoredEvent | null;
}

/** `[[id, [field, value, …]] | null, …]` (XRANGE, XREADGROUP's per-stream list, XAUTOCLAIM's second element). */
export function parseEntries(list: unknown): StreamEntry[] {
  if (!Array.isArray(list)) return [];
  const out: StreamEntry[] = [];
  for (const item of list) {
    if (!Array.isArray(item) || typeof item[0] !== 'string') continue;
    const fields = Array.isArray(item[1]) ? (item[1] as unknown[]) : [];
    let json: string | undefined;
    for (let i = 0; i + 1 < fields.length; i += 2) if (String(fields[i]) === 'e') json = String(fields[i + 1]);
    out.push({ entryId: item[0], event: json === undefined ? null : decodeEvent(json) });
  }
  return out;
}
