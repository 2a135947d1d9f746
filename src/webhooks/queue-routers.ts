import { globsForward, type RouteGlobs } from './app-routes.js';
import type { MarkerMacs } from './markers.js';
import type { QueueStore } from './queue-store.js';

/** How often a worker files its route table again (ms). */
export const ROUTES_ADVERTISE_INTERVAL_MS = 5000;
/** A filed route table is believed this long after it was filed (ms): a few intervals, so a missed refresh costs nothing. */
export const ROUTES_TTL_MS = 20_000;
/** How long a listing of the route tables is reused before it is read again (ms). */
const DIRECTORY_REFRESH_MS = 1000;
/**
 * Route tables read at most, the largest one read, and the most read in all (bytes): a fleet is
 * tens of replicas, a table a few globs. What a Redis writer files cannot make a listing larger.
 */
const MAX_ROUTERS = 4096;
export const MAX_ADVERT_BYTES = 16_384;
const MAX_LISTING_BYTES = 1_048_576;
/** A table is believed no longer than its life and this much clock skew between replicas (ms). */
const CLOCK_SKEW_MS = 5000;
/** A table past its life by this much more is removed (ms): its replica is gone. */
const FORGET_AFTER_MS = 60_000;

/** What a worker files: its consumer, until when to believe it (epoch ms) and its globs. */
interface Advert extends RouteGlobs {
  readonly consumer: string;
  /** Where it is filed (the routes key: the deployment's prefix): a table copied from another deployment that shares its secrets is no table here. */
  readonly filedAt: string;
  readonly until: number;
}

const isGlobList = (v: unknown): v is string[] => Array.isArray(v) && v.every((g) => typeof g === 'string');

/**
 * The fleet's route tables, as queue mode's workers tell one another (contract, Webhooks: a worker
 * whose routes do not take an entry leaves it for a replica whose routes do). Each worker files its
 * globs (never its URLs) every {@link ROUTES_ADVERTISE_INTERVAL_MS}, with a MAC keyed from the
 * webhook secrets: a table a Redis writer made, or one past its life, is no table, and nothing is
 * handed to it (the entry waits, or goes to a table that is one). Replicas of an older version file
 * nothing: an entry no table takes waits in the queue, where any replica, theirs included, reads it.
 */
export class RouterDirectory {
  private cache: { readonly at: number; readonly adverts: readonly Advert[]; readonly whole: boolean } | null = null;
  /** The listing being read, shared by every entry that asks meanwhile. */
  private reading: Promise<{ readonly adverts: readonly Advert[]; readonly whole: boolean }> | null = null;
  private withdrawn = false;

  constructor(
    private readonly o: {
      readonly store: QueueStore;
      /** This worker's consumer: never handed its own entries. */
      readonly consumer: string;
      readonly globs: RouteGlobs;
      readonly macs: MarkerMacs;
      /** Filed tables whose MAC did not verify. */
      readonly mismatches: { inc(labels: { marker: 'routes' }): void };
      /** Epoch ms. */
      readonly now: () => number;
    },
  ) {}

  /** Files this worker's route table for the next {@link ROUTES_TTL_MS}. */
  async advertise(): Promise<void> {
    if (this.withdrawn) return;
    const { consumer, globs } = this.o;
    const filedAt = this.o.store.routesAt;
    const advert: Advert = { consumer, filedAt, until: this.o.now() + ROUTES_TTL_MS, routes: globs.routes, ignore: globs.ignore, fallback: globs.fallback };
    const json = JSON.stringify(advert);
    const value = JSON.stringify({ advert: json, mac: this.o.macs.sign('routes', json) });
    if (consumer.length + value.length > MAX_ADVERT_BYTES) {
      throw new Error(`this replica's route table is ${consumer.length + value.length} bytes, over the ${MAX_ADVERT_BYTES} other replicas read: they will hand it nothing (fewer or shorter --app-webhook-route globs)`);
    }
    await this.o.store.advertiseRoutes(consumer, value);
    // Withdrawn while it was being filed (the worker stops): the table must not outlive the withdrawal.
    if (this.withdrawn) await this.o.store.forgetRoutes(consumer);
  }

  /** Removes this worker's table (it stops): nothing more is handed to it, and it files none again. */
  async withdraw(): Promise<void> {
    this.withdrawn = true;
    await this.o.store.forgetRoutes(this.o.consumer);
  }

  /**
   * A live consumer other than this one whose routes forward `type` (one at random among them), or
   * null. Rejects when that cannot be known: the tables cannot be read (a Redis error or timeout),
   * or none of those listed takes it and the listing was cut at its bounds (a writer's junk can
   * fill it): "none" is said only of every table.
   */
  async forwarderOf(type: string): Promise<string | null> {
    const now = this.o.now();
    if (this.cache === null || now - this.cache.at >= DIRECTORY_REFRESH_MS) this.cache = { at: now, ...(await this.listing(now)) };
    const takers = this.cache.adverts.filter((a) => a.consumer !== this.o.consumer && a.until > now && globsForward(a, type));
    if (takers.length > 0) return takers[Math.floor(Math.random() * takers.length)]!.consumer;
    if (!this.cache.whole) throw new Error(`the route tables' listing was cut at its bounds (${MAX_ROUTERS} tables, ${MAX_LISTING_BYTES} bytes) and none of those read routes ${type}`);
    return null;
  }

  private listing(now: number): Promise<{ readonly adverts: readonly Advert[]; readonly whole: boolean }> {
    this.reading ??= this.read(now).finally(() => (this.reading = null));
    return this.reading;
  }

  /** The tables filed that verify and are alive; those long dead are removed. */
  private async read(now: number): Promise<{ adverts: Advert[]; whole: boolean }> {
    const out: Advert[] = [];
    const listing = await this.o.store.routers({ max: MAX_ROUTERS, entryBytes: MAX_ADVERT_BYTES, totalBytes: MAX_LISTING_BYTES });
    for (const { consumer, json } of listing.tables) {
      const advert = this.parse(consumer, json);
      if (advert === null) continue;
      // One filed further ahead than its life and the skew allows comes from a clock that is wrong, or from no replica of ours.
      if (advert.until > now + ROUTES_TTL_MS + CLOCK_SKEW_MS) continue;
      if (advert.until > now) out.push(advert);
      else if (now - advert.until > FORGET_AFTER_MS) await this.o.store.forgetRoutes(consumer).catch(() => undefined); // tidying: the next reader tries again
    }
    return { adverts: out, whole: listing.whole };
  }

  /** A filed table whose MAC verifies and that is filed under its own consumer, in this deployment's key, else null (counted when the MAC fails). */
  private parse(consumer: string, json: string): Advert | null {
    let outer: { advert?: unknown; mac?: unknown };
    try {
      outer = JSON.parse(json) as { advert?: unknown; mac?: unknown };
    } catch {
      return null;
    }
    if (typeof outer?.advert !== 'string' || typeof outer.mac !== 'string') return null;
    if (!this.o.macs.verify('routes', outer.advert, outer.mac)) {
      this.o.mismatches.inc({ marker: 'routes' });
      return null;
    }
    const a = JSON.parse(outer.advert) as Partial<Advert>;
    if (a.consumer !== consumer || a.filedAt !== this.o.store.routesAt || !Number.isSafeInteger(a.until) || !isGlobList(a.routes) || !isGlobList(a.ignore) || typeof a.fallback !== 'boolean') return null;
    return a as Advert;
  }
}
