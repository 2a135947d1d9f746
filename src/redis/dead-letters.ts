import type { RedisConnection } from './connection.js';
import { parseEntries, type QueueKeys, type StoredEvent } from './queue-store.js';
import { REPLAY } from './queue-scripts.js';

/** One dead letter as `webhook dead-letters list` shows it. */
export interface DeadLetter {
  /** Entry id in the dead-letter stream. */
  readonly entryId: string;
  /** Envelope id. */
  readonly id: string;
  readonly type: string;
  readonly attempts: number;
  readonly lastError: string;
  /** Accepted at (epoch ms). */
  readonly acceptedAt: number;
  /** Parked at (epoch ms). */
  readonly deadAt: number;
}

/**
 * Entries read per XRANGE page. Each holds its whole body (up to --webhook-max-body-bytes, base64),
 * and every page must come back inside --redis-command-timeout-ms: small pages.
 */
export const DEAD_LETTER_PAGE = 50;

async function* deadEntries(conn: RedisConnection, keys: QueueKeys): AsyncGenerator<{ entryId: string; event: StoredEvent }> {
  let start = '-';
  for (;;) {
    const reply = await conn.call('queue_dead_list', (c) => c.sendCommand(['XRANGE', keys.dead, start, '+', 'COUNT', String(DEAD_LETTER_PAGE)]));
    const entries = parseEntries(reply);
    for (const e of entries) if (e.event) yield { entryId: e.entryId, event: e.event };
    if (entries.length < DEAD_LETTER_PAGE) return;
    start = `(${entries[entries.length - 1]!.entryId}`;
  }
}

/** Every dead letter, oldest first. */
export async function listDeadLetters(conn: RedisConnection, keys: QueueKeys): Promise<DeadLetter[]> {
  const out: DeadLetter[] = [];
  for await (const { entryId, event } of deadEntries(conn, keys)) {
    out.push({
      entryId,
      id: event.id,
      type: event.type,
      attempts: event.attempts,
      lastError: event.lastError ?? '',
      acceptedAt: event.acceptedAt,
      deadAt: event.deadAt ?? event.acceptedAt,
    });
  }
  return out;
}

/** What a replay did: event ids put back on the queue, and asked-for ids that are not dead letters. */
export interface ReplayResult {
  readonly replayed: string[];
  readonly notFound: string[];
}

/**
 * Puts dead letters back on the queue with a fresh horizon and no attempts: every one (`all`), or
 * those whose event id is in `ids`. Each move is one script (gone from the dead letters, on the
 * queue), so two operators replaying at once never double an event.
 */
export async function replayDeadLetters(conn: RedisConnection, keys: QueueKeys, which: { all: true } | { ids: readonly string[] }, now: number): Promise<ReplayResult> {
  const wanted = 'ids' in which ? new Set(which.ids) : null;
  const replayed: string[] = [];
  const found = new Set<string>();
  for await (const { entryId, event } of deadEntries(conn, keys)) {
    if (wanted && !wanted.has(event.id)) continue;
    found.add(event.id);
    const fresh: StoredEvent = { id: event.id, type: event.type, headers: event.headers, body: event.body, acceptedAt: now, attempts: 0 };
    const moved = await conn.call('queue_replay', (c) =>
      REPLAY.run(c, [keys.dead, keys.events, keys.born], [entryId, JSON.stringify(fresh), event.id, String(now), keys.wake]),
    );
    if (moved === 1) replayed.push(event.id);
  }
  const notFound = wanted ? [...wanted].filter((id) => !found.has(id)) : [];
  return { replayed, notFound };
}
