import { MarkerMacs } from './markers.js';
import type { QueueEntry, QueueStore, ReadBounds } from './queue-store.js';
import { decodeStored, deadSubject, replaySubject, reverify, storedDeliveryMaxBytes, storedType, type StoredDelivery } from './stored-delivery.js';

/** One dead letter as `webhook dead-letters list` shows it. */
export interface DeadLetter {
  /** Entry id in the dead-letter stream. */
  readonly entryId: string;
  /** Envelope id ('' when the dead letter was too large to read). */
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

/** Dead letters asked for per page; a page also stops at {@link DEAD_LETTER_PAGE_BYTES}. */
export const DEAD_LETTER_PAGE = 50;
/**
 * Bytes one page brings into the process at most (about: one entry may take it past). Every page
 * must also come back inside --redis-command-timeout-ms.
 */
export const DEAD_LETTER_PAGE_BYTES = 4 * 1024 * 1024;

/** How much a listing reads: no dead letter larger than a stored body of `maxBodyBytes`. */
export function deadLetterBounds(maxBodyBytes: number): ReadBounds {
  const entryBytes = storedDeliveryMaxBytes(maxBodyBytes);
  return { entryBytes, batchBytes: Math.max(DEAD_LETTER_PAGE_BYTES, entryBytes) };
}

/** Every dead letter, page by page, until a page comes back empty (a page cut by its bytes is not the end). */
async function* deadEntries(store: QueueStore, bounds: ReadBounds): AsyncGenerator<{ entry: QueueEntry; stored: StoredDelivery | null }> {
  let after: string | null = null;
  for (;;) {
    const entries = await store.listDead(after, DEAD_LETTER_PAGE, bounds);
    if (entries.length === 0) return;
    for (const entry of entries) yield { entry, stored: decodeStored(entry.json) };
    after = entries[entries.length - 1]!.entryId;
  }
}

/**
 * Every dead letter, oldest first, never one larger than `bounds` allows: such a one is listed by
 * its size alone (entries that are not stored deliveries are skipped).
 */
export async function listDeadLetters(store: QueueStore, bounds: ReadBounds): Promise<DeadLetter[]> {
  const out: DeadLetter[] = [];
  for await (const { entry, stored } of deadEntries(store, bounds)) {
    if (entry.size !== undefined) {
      out.push({ entryId: entry.entryId, id: '', type: '?', attempts: 0, lastError: `oversized (${entry.size} bytes, not read)`, acceptedAt: 0, deadAt: 0 });
      continue;
    }
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

/**
 * What a replay did: ids put back on the queue, asked-for ids that are not dead letters, and ids
 * left where they are: their signature does not verify or they carry no dead-letter mark of ours
 * (`notVerified`), or the app has had the event (`delivered`: its delivered marker stands).
 */
export interface ReplayResult {
  readonly replayed: string[];
  readonly notFound: string[];
  readonly notVerified: string[];
  readonly delivered: string[];
}

/**
 * Puts dead letters back on the queue with a fresh horizon and no attempts: every one (`all`), or
 * those whose event id is in `ids`. Each is verified again against `secrets` first (contract:
 * before every replay), and must carry the mark a worker gives what the app refused, or no
 * replica's routes took (`unrouted`), until the horizon (a MAC keyed from the secrets,
 * {@link deadSubject}): one added to the dead letters by
 * whoever can write to Redis (an old delivery kept from the queue, however genuine), or parked as
 * `expired` or `signature_mismatch`, stays where it is and is reported. So does one whose event
 * the app has had since (a delivered marker whose MAC verifies: a copy a writer added while the
 * event waited, parked for the app's refusals). A replay re-authorises the event for a horizon from
 * now: it carries a replay mark ({@link replaySubject}) the workers check. Each move is one step in
 * the store, so two operators replaying at once never double an event.
 */
export async function replayDeadLetters(
  store: QueueStore,
  which: { all: true } | { ids: readonly string[] },
  secrets: readonly string[],
  now: number,
  bounds: ReadBounds,
): Promise<ReplayResult> {
  const macs = new MarkerMacs(() => secrets);
  const wanted = 'ids' in which ? new Set(which.ids) : null;
  const replayed: string[] = [];
  const notVerified: string[] = [];
  const delivered: string[] = [];
  const found = new Set<string>();
  for await (const { entry, stored } of deadEntries(store, bounds)) {
    if (!stored || (wanted && !wanted.has(stored.id))) continue;
    found.add(stored.id);
    const marked = stored.deadAt !== undefined && macs.verify('dead', deadSubject(stored, stored.deadAt), stored.deadMac);
    if (!marked || !reverify(stored, secrets).ok) {
      notVerified.push(stored.id);
      continue;
    }
    const [mark] = await store.deliveredMarks([stored.id]);
    if (macs.verify('delivered', stored.id, mark)) {
      delivered.push(stored.id);
      continue;
    }
    const fresh: StoredDelivery = {
      ...stored,
      acceptedAt: now,
      attempts: 0,
      routeWaits: undefined,
      lastError: undefined,
      deadAt: undefined,
      deadMac: undefined,
      replayedAt: now,
      replayMac: macs.sign('replay', replaySubject(stored, now)),
    };
    if (await store.replayDead(entry.entryId, stored.id, JSON.stringify(fresh), now)) replayed.push(stored.id);
  }
  const notFound = wanted ? [...wanted].filter((id) => !found.has(id)) : [];
  return { replayed, notFound, notVerified, delivered };
}
