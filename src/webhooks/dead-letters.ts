import type { QueueEntry, QueueStore } from './queue-store.js';
import { decodeStored, reverify, storedType, type StoredDelivery } from './stored-delivery.js';

/** One dead letter as `webhook dead-letters list` shows it. */
export interface DeadLetter {
  /** Entry id in the dead-letter stream. */
  readonly entryId: string;
  /** Envelope id. */
  readonly id: string;
  /** Envelope type, read from the stored body (unverified: a listing only shows). */
  readonly type: string;
  readonly attempts: number;
  readonly lastError: string;
  /** Accepted at (epoch ms). */
  readonly acceptedAt: number;
  /** Parked at (epoch ms). */
  readonly deadAt: number;
}

/**
 * Dead letters read per page. Each holds its whole body (up to --webhook-max-body-bytes, base64),
 * and every page must come back inside --redis-command-timeout-ms: small pages.
 */
export const DEAD_LETTER_PAGE = 50;

async function* deadEntries(store: QueueStore): AsyncGenerator<{ entry: QueueEntry; stored: StoredDelivery | null }> {
  let after: string | null = null;
  for (;;) {
    const entries = await store.listDead(after, DEAD_LETTER_PAGE);
    for (const entry of entries) yield { entry, stored: decodeStored(entry.json) };
    if (entries.length < DEAD_LETTER_PAGE) return;
    after = entries[entries.length - 1]!.entryId;
  }
}

/** Every dead letter, oldest first (entries that are not stored deliveries are skipped). */
export async function listDeadLetters(store: QueueStore): Promise<DeadLetter[]> {
  const out: DeadLetter[] = [];
  for await (const { entry, stored } of deadEntries(store)) {
    if (!stored) continue;
    out.push({
      entryId: entry.entryId,
      id: stored.id,
      type: storedType(stored),
      attempts: stored.attempts,
      lastError: stored.lastError ?? '',
      acceptedAt: stored.acceptedAt,
      deadAt: stored.deadAt ?? stored.acceptedAt,
    });
  }
  return out;
}

/** What a replay did: ids put back on the queue, asked-for ids that are not dead letters, and ids that do not verify (left where they are). */
export interface ReplayResult {
  readonly replayed: string[];
  readonly notFound: string[];
  readonly notVerified: string[];
}

/**
 * Puts dead letters back on the queue with a fresh horizon and no attempts: every one (`all`), or
 * those whose event id is in `ids`. Each is verified again against `secrets` first (contract:
 * before every replay): one that does not verify (forged or altered in Redis, or signed with a
 * secret no longer configured) stays a dead letter and is reported. Each move is one step in the
 * store, so two operators replaying at once never double an event.
 */
export async function replayDeadLetters(
  store: QueueStore,
  which: { all: true } | { ids: readonly string[] },
  secrets: readonly string[],
  now: number,
): Promise<ReplayResult> {
  const wanted = 'ids' in which ? new Set(which.ids) : null;
  const replayed: string[] = [];
  const notVerified: string[] = [];
  const found = new Set<string>();
  for await (const { entry, stored } of deadEntries(store)) {
    if (!stored || (wanted && !wanted.has(stored.id))) continue;
    found.add(stored.id);
    if (!reverify(stored, secrets).ok) {
      notVerified.push(stored.id);
      continue;
    }
    const fresh: StoredDelivery = { ...stored, acceptedAt: now, attempts: 0, lastError: undefined, deadAt: undefined };
    if (await store.replayDead(entry.entryId, stored.id, JSON.stringify(fresh), now)) replayed.push(stored.id);
  }
  const notFound = wanted ? [...wanted].filter((id) => !found.has(id)) : [];
  return { replayed, notFound, notVerified };
}
