import { identityOf } from './identity.js';
import type { NotificationRequirementItem } from './list-pending.js';
import type { RedecMetrics } from './metrics.js';

/** Event type of what the reconciler hands to the app (CONTRACT.md). */
export const RECONCILED_EVENT_TYPE = 'consent_sidecar.redec.notification_pending';
/** The mark of a reconciled event; it never carries `x-consent-sidecar-verified`. */
export const RECONCILED_HEADER = 'x-consent-sidecar-reconciled';
/** Obligations handed to the app at once. */
const HAND_CONCURRENCY = 8;
/** Handed identities recorded per ledger write. */
const MARK_BATCH = 500;

/** Posts one reconciled event to the app; ok only on a 2xx. */
export type DeliverToApp = (body: Buffer, headers: Record<string, string>) => Promise<{ readonly ok: boolean; readonly detail?: string }>;

/** A record to hand: as held (its JSON text), or as just listed (the parsed object). */
export type HeldRecord = string | NotificationRequirementItem;

/** What the app refused in one run, for its one log line. */
export interface Refusals {
  count: number;
  lastDetail: string | undefined;
}

export interface HandOffDeps {
  readonly deliver: DeliverToApp;
  readonly metrics: RedecMetrics;
  readonly now: () => number;
  /** Records that these were accepted by the app at `at` (the ledger, through the run's guard). */
  readonly markHanded: (identities: readonly string[], at: number) => Promise<void>;
  /** True once the sidecar is stopping: nothing more is handed. */
  readonly stopped: () => boolean;
  /** After each obligation (the lease is renewed); throws to stop the run. */
  readonly afterEach: () => Promise<void>;
}

/**
 * `{"id":"reconcile_<identity>","type":…,"occurredAt":<ms>,"data":<record>}`: what JSON.stringify of
 * that object writes, members in that order, around the record's JSON text when it is held as text.
 */
export function reconciledEvent(identity: string, occurredAt: number, record: HeldRecord): Buffer {
  const id = `reconcile_${identity}`;
  if (typeof record !== 'string') return Buffer.from(JSON.stringify({ id, type: RECONCILED_EVENT_TYPE, occurredAt, data: record }));
  const head = JSON.stringify({ id, type: RECONCILED_EVENT_TYPE, occurredAt });
  return Buffer.from(`${head.slice(0, -1)},"data":${record}}`);
}

/** The records of `page` whose identity is in `due` (taken out of it). */
export function dueIn(page: readonly NotificationRequirementItem[], due: Set<string>): (readonly [string, HeldRecord])[] {
  const batch: (readonly [string, HeldRecord])[] = [];
  for (const record of page) {
    const id = identityOf(record);
    if (due.delete(id)) batch.push([id, record]);
  }
  return batch;
}

/**
 * Hands each obligation of `due` to the app as a reconciled event, {@link HAND_CONCURRENCY} at a time,
 * counting each outcome and adding refusals to `tally`. What the app accepted is recorded (in
 * batches) even when a worker failed, so it is not handed twice; the first failure is rethrown.
 */
export async function handToApp(due: readonly (readonly [string, HeldRecord])[], tally: Refusals, deps: HandOffDeps): Promise<void> {
  let next = 0;
  // Set when one worker stops the run (lease lost, Redis): the others hand nothing more.
  let aborted = false;
  let accepted: string[] = [];
  const flush = async (): Promise<void> => {
    const batch = accepted;
    accepted = [];
    if (batch.length > 0) await deps.markHanded(batch, deps.now());
  };
  const loop = async (): Promise<void> => {
    while (next < due.length && !deps.stopped() && !aborted) {
      const [id, record] = due[next++]!;
      const result = await deps.deliver(reconciledEvent(id, deps.now(), record), { 'content-type': 'application/json', [RECONCILED_HEADER]: '1' });
      deps.metrics.handed.labels(result.ok ? 'accepted' : 'failed').inc();
      if (result.ok) accepted.push(id);
      else {
        tally.count += 1;
        tally.lastDetail = result.detail;
      }
      if (accepted.length >= MARK_BATCH) await flush();
      await deps.afterEach();
    }
  };
  const worker = async (): Promise<void> => {
    try {
      await loop();
    } catch (err) {
      aborted = true;
      throw err;
    }
  };
  const results = await Promise.allSettled(Array.from({ length: Math.min(HAND_CONCURRENCY, due.length) }, worker));
  await flush();
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}
