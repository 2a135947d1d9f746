import type { AcceptedMarks, Enqueued, ForwardClaim, QueueBatch, QueueEntry, QueueStats, QueueStore, ReadBounds } from '../../../src/webhooks/queue-store.js';
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
 * - claimForward: `delivered` when the event's delivered marker carries one of the MACs given;
 *   `busy` while another token's `forwarding:` claim has at most the longest lease left; otherwise
 *   the claim is written (renewed for the same token) for the lease, `displaced` when another value
 *   was there; releaseForward frees it only for its own token.
 *
 * The model reads {@link holds} and {@link dead} to tell whether an event is in the store, and
 * {@link claimOf} and {@link recordedAt} to tell what a forward was covered by. A writer without
 * the secrets adds copies of an event ({@link copy}) and writes claims ({@link forgeClaim}).
 */
export class StandInQueueStore {
  private readonly entries = new Map<string, Entry>();
  private readonly accepted = new Map<string, { mac: string; until: number }>();
  private readonly delivered = new Map<string, { mac: string; until: number }>();
  private readonly claims = new Map<string, { value: string; until: number; link: string }>();
  /** When the store first held each event's delivered marker (epoch ms). */
  private readonly recorded = new Map<string, number>();
  /** Each event's delivery as first stored: what a writer who reads Redis can copy. */
  private readonly stored = new Map<string, string>();
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
      routesAt: 'queue-routes',
      enqueue: (eventId, json, acceptedAt, retentionMs, marks) => op('enqueue', () => this.enqueue(eventId, json, acceptedAt, retentionMs, marks)),
      readNew: (consumer, max, bounds) => op('readNew', () => this.batch(this.list((e) => e.state === 'new', max, bounds), consumer)),
      readPending: (consumer, max, after, bounds) =>
        op('readPending', () => this.batch(this.list((e) => e.state === 'pending' && e.consumer === consumer && e.seq > seqOf(after), max, bounds), consumer)),
      takeOver: (consumer, minIdleMs, max, bounds) =>
        op('takeOver', () => this.batch(this.list((e) => e.state === 'pending' && Date.now() - e.since >= minIdleMs, max, bounds), consumer)),
      deliveredMarks: (ids) => op('deliveredMarks', () => ids.map((id) => this.live(this.delivered, id)?.mac ?? null)),
      claimForward: (eventId, token, leaseMs, longestLeaseMs, macs) => op('claimForward', () => this.claim(link.name, eventId, token, leaseMs, longestLeaseMs, macs)),
      releaseForward: (eventId, token) =>
        op('releaseForward', () => {
          if (this.live(this.claims, eventId)?.value === `forwarding:${token}`) this.claims.delete(eventId);
        }),
      markDelivered: (entryId, eventId, ttlMs, mac) =>
        op('markDelivered', () => {
          this.delivered.set(eventId, { mac, until: Date.now() + ttlMs });
          if (!this.recorded.has(eventId)) this.recorded.set(eventId, Date.now());
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
        op('routers', () => {
          const tables: { consumer: string; json: string }[] = [];
          let total = 0;
          for (const [consumer, json] of this.adverts) {
            const size = consumer.length + json.length;
            if (size > bounds.entryBytes) continue;
            if (tables.length >= bounds.max || total + size > bounds.totalBytes) return { tables, whole: false };
            total += size;
            tables.push({ consumer, json });
          }
          return { tables, whole: true };
        }),
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

  /** The live forward claim of `eventId`: which replica's link wrote it, and until when. */
  claimOf(eventId: string): { readonly link: string; readonly until: number } | undefined {
    const c = this.live(this.claims, eventId);
    return c && { link: c.link, until: c.until };
  }

  /** When the store first held the delivered marker of `eventId`, if it does. */
  recordedAt(eventId: string): number | undefined {
    return this.recorded.get(eventId);
  }

  /** A writer adds `n` copies of `eventId`'s delivery as first stored (new entries); false when it never was. */
  copy(eventId: string, n: number): boolean {
    const json = this.stored.get(eventId);
    if (json === undefined) return false;
    for (let i = 0; i < n; i++) this.add(eventId, json, Date.now());
    this.wire.publish(WAKE, null);
    return true;
  }

  /**
   * A writer puts `value` in `eventId`'s forward claim, for `ttlMs` (or for ever), unless a
   * replica's claim is live: one who overwrites or deletes the claim of a forward that runs can
   * have a copy forwarded beside it, once per such write (docs/fleet.md says so), which the model
   * does not hold the policy to.
   */
  forgeClaim(eventId: string, value: string, ttlMs = Infinity): void {
    const c = this.live(this.claims, eventId);
    if (c && c.link !== 'writer') return;
    this.claims.set(eventId, { value, until: Date.now() + ttlMs, link: 'writer' });
  }

  private claim(link: string, eventId: string, token: string, leaseMs: number, longestLeaseMs: number, macs: readonly string[]): ForwardClaim {
    const marker = this.live(this.delivered, eventId);
    if (marker && macs.includes(marker.mac)) return { kind: 'delivered' };
    const mine = `forwarding:${token}`;
    const c = this.live(this.claims, eventId);
    const remainingMs = c ? c.until - Date.now() : 0;
    if (c && c.value !== mine && c.value.startsWith('forwarding:') && Number.isFinite(c.until) && remainingMs <= longestLeaseMs) return { kind: 'busy', remainingMs };
    this.claims.set(eventId, { value: mine, until: Date.now() + leaseMs, link });
    return { kind: 'claimed', displaced: c !== undefined && c.value !== mine };
  }

  private add(eventId: string, json: string, acceptedAt: number): void {
    const seq = ++this.seq;
    this.entries.set(`${seq}-0`, { entryId: `${seq}-0`, seq, eventId, json, acceptedAt, state: 'new', consumer: null, since: 0, dueAt: 0 });
  }

  private enqueue(eventId: string, json: string, acceptedAt: number, retentionMs: number, marks: AcceptedMarks): Enqueued {
    const marker = this.live(this.accepted, eventId);
    if (marker && marks.accepted.includes(marker.mac)) return { outcome: 'duplicate', displaced: false };
    this.accepted.set(eventId, { mac: marks.mac, until: Date.now() + retentionMs });
    if (!this.stored.has(eventId)) this.stored.set(eventId, json);
    this.add(eventId, json, acceptedAt);
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

  private live<V extends { until: number }>(map: Map<string, V>, id: string): V | undefined {
    const v = map.get(id);
    if (v && Date.now() >= v.until) map.delete(id);
    return v && Date.now() < v.until ? v : undefined;
  }
}

function seqOf(entryId: string): number {
  return Number(entryId.split('-')[0]) || 0;
}
