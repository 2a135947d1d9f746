import { performance } from 'node:perf_hooks';
import type { InvalidationEntry, InvalidationLog, InvalidationNudge, InvalidationPage } from '../../../src/decision/invalidation-log.js';
import type { EntryMacs } from '../../../src/decision/invalidation-seal.js';
import type { Revocation } from '../../../src/lib/revocation-hook.js';
import type { Link, Wire } from './wire.js';

/** The channel nudges are published on (a test may drop, reorder or forge them: `Link.dropNext`, `Link.swapNext`, `Wire.publish`). */
export const APPENDED = 'invalidation-appended';
const echoChannel = (link: Link): string => `invalidation-echo:${link.name}`;

interface Kept {
  readonly seq: number;
  readonly at: number;
  readonly origin: string;
  readonly revocation: Revocation;
  readonly mac: string | null;
}

/**
 * The stand-ins' MACs: a subject's MAC is the subject under a mark only the replicas hold (the
 * stand-in log never makes one), so a rewritten entry verifies no more than under HMAC.
 */
export const standInMacs: EntryMacs = {
  sign: (subject) => `sealed:${subject}`,
  verify: (subject, mac) => mac === `sealed:${subject}`,
};

/**
 * A scripted stand-in of {@link InvalidationLog}: an ordered, numbered log on the injected clock,
 * behind the fault script of {@link Wire}, that can lose entries the ways a Redis stream does and
 * says so in each page's flags: {@link trim} (from the front: `trimmed`), {@link remove} (one entry:
 * `deleted`), {@link restartEmpty} (a new epoch); and an entry rewritten in place, which no flag
 * tells ({@link rewrite}). Positions and entry ids are sequence numbers as strings. An append is
 * two calls, as on Redis: the entry (`append`), then its nudge (`publish`, to every link, which the
 * test may drop or reorder per link); each read echoes its token to the reading link alone, when
 * its effect runs.
 *
 * For the model, `seen(link, revoked)` hears, for each page a reader was answered, the revocations
 * appended (in any epoch) before that read ran: the ones that reader now knows of.
 */
export class StandInInvalidationLog {
  private kept: Kept[] = [];
  private epoch = 1;
  private bornAt = Date.now();
  private head = 0;
  /** The lowest sequence still in the log if nothing had been removed from the front. */
  private trimmedThrough = 0;
  private readonly deletedSeqs = new Set<number>();
  /** Every revocation ever appended, in order. */
  readonly appended: Revocation[] = [];
  /** Every nudge published, in order (a writer may publish any of them again). */
  readonly published: InvalidationNudge[] = [];

  constructor(
    private readonly wire: Wire,
    private readonly seen: (link: Link, revoked: readonly Revocation[]) => void,
  ) {}

  connect(link: Link): InvalidationLog {
    const read = (op: string, page: () => InvalidationPage): Promise<InvalidationPage> => {
      let known: Revocation[] = [];
      return link.call(
        op,
        () => {
          known = [...this.appended];
          return page();
        },
        () => this.seen(link, known),
      );
    };
    const echo = (token: string | undefined): void => {
      if (token !== undefined) this.wire.publish(echoChannel(link), token);
    };
    return {
      append: async (origin, revocation, seal) => {
        const place = await link.call('append', () => {
          const previous = this.head;
          const seq = ++this.head;
          const at = { epoch: String(this.epoch), id: String(seq) };
          this.kept.push({ seq, at: Date.now(), origin, revocation, mac: seal.entry(at) });
          this.appended.push(revocation);
          return { ...at, previous: String(previous) };
        });
        const nudge: InvalidationNudge = { entry: { id: place.id, previous: place.previous, origin, revocation, chain: seal.chain(place) } };
        await link.call('publish', () => {
          this.published.push(nudge);
          this.wire.publish(APPENDED, nudge);
        });
        return place;
      },
      readAfter: (position, max, options = {}) =>
        read('readAfter', () => {
          echo(options.echo);
          return position === null ? this.page([], false, false) : this.after(Number(position), max);
        }),
      readSince: (sinceMs, max, options = {}) =>
        read('readSince', () => {
          echo(options.echo);
          const since = this.kept.filter((k) => k.at >= sinceMs);
          return this.page(since.slice(0, max), this.trimmedAt !== null && this.trimmedAt >= sinceMs, false);
        }),
      compareIds: (a, b) => Number(a) - Number(b),
      step: (position, entry) => {
        const at = Number(position);
        if (Number(entry.id) <= at) return 'stale';
        return Number(entry.previous) === at ? { next: entry.id } : 'gap';
      },
      onAppended: (listener) => link.subscribe(APPENDED, (nudge: InvalidationNudge) => listener(nudge)),
      onEcho: (listener) => void link.subscribe(echoChannel(link), (token: string) => listener(token)),
      echo: (token) => link.call('echo', () => echo(token)),
      onRestored: (hook) => link.onRestored(hook),
      onDisturbed: (hook) => link.onDisturbed(hook),
      answeredSince: (since) => performance.now() - link.silentForMs() >= since,
    };
  }

  /** The oldest `n` entries are trimmed away. */
  trim(n: number): void {
    const gone = this.kept.splice(0, n);
    if (gone.length === 0) return;
    this.trimmedThrough = gone[gone.length - 1]!.seq;
    this.trimmedAt = gone[gone.length - 1]!.at;
  }

  /** The `index`th entry (modulo how many there are) is deleted by hand. */
  remove(index: number): void {
    if (this.kept.length === 0) return;
    const [gone] = this.kept.splice(index % this.kept.length, 1);
    this.deletedSeqs.add(gone!.seq);
  }

  /**
   * The `index`th entry (modulo how many there are) rewritten in place, its id and the log's
   * counters kept: it takes the fields, MAC included, of the entry before it, or, for the oldest,
   * names another user (or anybody's consent for all) under its own MAC.
   */
  rewrite(index: number): void {
    if (this.kept.length === 0) return;
    const i = index % this.kept.length;
    const entry = this.kept[i]!;
    const before = this.kept[i - 1];
    const other: Revocation = entry.revocation.scope === 'user' ? { scope: 'user', userReference: `not-${entry.revocation.userReference}` } : { scope: 'user', userReference: 'nobody' };
    this.kept[i] = before ? { ...before, seq: entry.seq, at: entry.at } : { ...entry, revocation: other };
  }

  /** The store restarted empty: a new epoch, born now. */
  restartEmpty(): void {
    this.kept = [];
    this.epoch++;
    this.bornAt = Date.now();
    this.head = 0;
    this.trimmedThrough = 0;
    this.trimmedAt = null;
    this.deletedSeqs.clear();
  }

  private trimmedAt: number | null = null;

  private after(position: number, max: number): InvalidationPage {
    const entries = this.kept.filter((k) => k.seq > position).slice(0, max);
    const deleted = [...this.deletedSeqs].some((s) => s > position);
    return { ...this.page(entries, this.trimmedThrough > position, deleted), rewound: position > this.head };
  }

  private page(kept: readonly Kept[], trimmed: boolean, deleted: boolean): InvalidationPage {
    const entries = kept.map((k): InvalidationEntry => ({ position: String(k.seq), id: String(k.seq), origin: k.origin, revocation: k.revocation, mac: k.mac }));
    return { epoch: String(this.epoch), epochBornMs: this.bornAt, head: String(this.head), trimmed, deleted, rewound: false, entries };
  }
}
