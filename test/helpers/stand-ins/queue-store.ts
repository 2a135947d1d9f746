import type { AcceptedMarks, Enqueued, QueueBatch, QueueEntry, QueueStats, QueueStore, ReadBounds } from '../../../src/webhooks/queue-store.js';
import type { Link, Wire } from './wire.js';

const WAKE = 'queue-wake';
const DELIVERED = 'queue-delivered';
const HANDED = 'queue-handed';

interface Entry {
  readonly entryId: string;
  readonly seq: number;
  readonly eventId: string;
  json: string;
  acceptedAt: number;
  /** `new`: not read yet; `pending`: some consumer's; `parked`: waiting for `dueAt`. */
  state: 'new' | 'pending' | 'parked';
  consumer: string | null;
  /** Epoch ms the entry became (or was read again as) its consumer's: its visibility counts from here. */
  since: number;
  dueAt: number;
}

/**
 * A scripted stand-in of {@link QueueStore}: the semantics of the Redis stream and scripts
 * (src/redis/queue-store.ts, one consumer group) on plain maps, on the injected clock, behind the
 * fault script of {@link Wire} (each replica's calls go through its own link). Each method is one
 * atomic step, as each Redis script is:
 *
 * - enqueue: a duplicate when the id's accepted marker carries one of the MACs given; otherwise the
 *   marker is written and the entry stored (`new`), and a wake is published;
 * - readNew makes new entries the consumer's; readPending reads the consumer's own again and
 *   restarts their visibility (as XREADGROUP … 0 resets the idle time); takeOver takes entries
 *   idle at least `minIdleMs` from any consumer;
 * - markDelivered writes the delivered marker, removes the entry and announces the delivery;
 *   retryLater, deadLetter and handOver move an entry only while it is the caller's; handOver makes it
 *   another consumer's (its visibility starting afresh) and tells that one; promoteDue moves due
 *   parked entries back to new;
 * - advertiseRoutes, forgetRoutes and routers file, remove and list each consumer's route table.
 *
 * The model reads {@link holds} and {@link dead} to tell whether an event is in the store.
 */
export class StandInQueueStore {
  private readonly entries = new Map<string, Entry>();
  private readonly accepted = new Map<string, { mac: string; until: number }>();
  private readonly delivered = new Map<string, { mac: string; until: number }>();
  /** Dead letters, oldest first. */
  readonly dead: { entryId: string; eventId: string; json: string }[] = [];
  /** Route tables filed, by consumer. */
  readonly adverts = new Map<string, string>();
  private seq = 0;

  constructor(private readonly wire: Wire) {}

  /** The store as one replica sees it, through `link`. */
  connect(link: Link): QueueStore {
    const op = <T>(name: string, effect: () => T): Promise<T> => link.call(name, effect);
    return {
      enqueue: (eventId, json, acceptedAt, retentionMs, marks) => op('enqueue', () => this.enqueue(eventId, json, acceptedAt, retentionMs, marks)),
      readNew: (consumer, max, bounds) => op('readNew', () => this.batch(this.list((e) => e.state === 'new', max, bounds), consumer)),
      readPending: (consumer, max, after, bounds) =>
        op('readPending', () => this.batch(this.list((e) => e.state === 'pending' && e.consumer === consumer && e.seq > seqOf(after), max, bounds), consumer)),
      takeOver: (consumer, minIdleMs, max, bounds) =>
        op('takeOver', () => this.batch(this.list((e) => e.state === 'pending' && Date.now() - e.since >= minIdleMs, max, bounds), consumer)),
      deliveredMarks: (ids) => op('deliveredMarks', () => ids.map((id) => this.live(this.delivered, id)?.mac ?? null)),
      markDelivered: (entryId, eventId, ttlMs, mac) =>
        op('markDelivered', () => {
          this.delivered.set(eventId, { mac, until: Date.now() + ttlMs });
          this.entries.delete(entryId);
          this.wire.publish(DELIVERED, { id: eventId, mac });
        }),
      drop: (entryId) => op('drop', () => void this.entries.delete(entryId)),
      retryLater: (consumer, entryId, dueAt, json) => op('retryLater', () => this.move(consumer, entryId, (e) => Object.assign(e, { state: 'parked', consumer: null, dueAt, json }))),
      deadLetter: (consumer, entryId, eventId, json) =>
        op('deadLetter', () =>
          this.move(consumer, entryId, () => {
            this.entries.delete(entryId);
            this.dead.push({ entryId, eventId, json });
          }),
        ),
      handOver: (consumer, entryId, to) =>
        op('handOver', () =>
          this.move(consumer, entryId, (e) => {
            Object.assign(e, { consumer: to, since: Date.now() });
            this.wire.publish(HANDED, to);
          }),
        ),
      advertiseRoutes: (consumer, json) => op('advertiseRoutes', () => void this.adverts.set(consumer, json)),
      forgetRoutes: (consumer) => op('forgetRoutes', () => void this.adverts.delete(consumer)),
      routers: (bounds) =>
        op('routers', () =>
          [...this.adverts]
            .filter(([, json]) => json.length <= bounds.entryBytes)
            .slice(0, bounds.max)
            .map(([consumer, json]) => ({ consumer, json })),
        ),
      promoteDue: (now, max) => op('promoteDue', () => this.promote(now, max)),
      stats: () => op('stats', () => this.stats()),
      sweepConsumers: () => op('sweepConsumers', () => undefined),
      listDead: () => op('listDead', () => this.dead.map((d) => ({ entryId: d.entryId, json: d.json }))),
      replayDead: () => op('replayDead', () => false),
      exists: () => op('exists', () => true),
      onWake: (wake) => link.subscribe(WAKE, () => wake()),
      onDelivered: (listener) => link.subscribe(DELIVERED, (m: { id: string; mac: string }) => listener(m.id, m.mac)),
      onHandedOver: (consumer, hook) => link.subscribe(HANDED, (to: string) => to === consumer && hook()),
      onRestored: (hook) => link.onRestored(hook),
    };
  }

  /** Whether the store holds `eventId`: an entry waiting, pending or parked, or a dead letter. */
  holds(eventId: string): boolean {
    return [...this.entries.values()].some((e) => e.eventId === eventId) || this.dead.some((d) => d.eventId === eventId);
  }

  private enqueue(eventId: string, json: string, acceptedAt: number, retentionMs: number, marks: AcceptedMarks): Enqueued {
    const marker = this.live(this.accepted, eventId);
    if (marker && marks.accepted.includes(marker.mac)) return { outcome: 'duplicate', displaced: false };
    this.accepted.set(eventId, { mac: marks.mac, until: Date.now() + retentionMs });
    const seq = ++this.seq;
    this.entries.set(`${seq}-0`, { entryId: `${seq}-0`, seq, eventId, json, acceptedAt, state: 'new', consumer: null, since: 0, dueAt: 0 });
    this.wire.publish(WAKE, null);
    return { outcome: 'queued', displaced: marker !== undefined };
  }

  private list(which: (e: Entry) => boolean, max: number, bounds: ReadBounds): Entry[] {
    return [...this.entries.values()]
      .filter(which)
      .sort((a, b) => a.seq - b.seq)
      .filter((e) => e.json.length <= bounds.entryBytes)
      .slice(0, Math.max(0, max));
  }

  /** The entries handed over, now `consumer`'s, their visibility starting now. */
  private batch(entries: Entry[], consumer: string): QueueBatch {
    const now = Date.now();
    for (const e of entries) Object.assign(e, { state: 'pending', consumer, since: now });
    return { entries: entries.map((e): QueueEntry => ({ entryId: e.entryId, json: e.json })), oversized: 0 };
  }

  private move(consumer: string, entryId: string, effect: (e: Entry) => void): boolean {
    const e = this.entries.get(entryId);
    if (e?.state !== 'pending' || e.consumer !== consumer) return false;
    effect(e);
    return true;
  }

  private promote(now: number, max: number): number {
    const due = [...this.entries.values()].filter((e) => e.state === 'parked' && e.dueAt <= now).slice(0, max);
    for (const e of due) Object.assign(e, { state: 'new', consumer: null });
    if (due.length > 0) this.wire.publish(WAKE, null);
    return due.length;
  }

  private stats(): QueueStats {
    const waiting = [...this.entries.values()];
    return { depth: waiting.length, oldestAcceptedAt: waiting.length === 0 ? null : Math.min(...waiting.map((e) => e.acceptedAt)), deadLetters: this.dead.length };
  }

  private live(map: Map<string, { mac: string; until: number }>, id: string): { mac: string; until: number } | undefined {
    const v = map.get(id);
    if (v && Date.now() >= v.until) map.delete(id);
    return v && Date.now() < v.until ? v : undefined;
  }
}

function seqOf(entryId: string): number {
  return Number(entryId.split('-')[0]) || 0;
}
