import { appUrl, type AppUrl } from './app-client.js';

/** One `--app-webhook-route 'GLOB=URL'`: events whose type matches go to `url`. */
export interface AppRouteSpec {
  /** `*` matches any run of characters (none included); everything else matches itself. */
  readonly glob: string;
  readonly url: URL;
}

/** Where one event goes, and the label its forwards are counted under (the glob, or `default`). */
export interface AppTarget {
  readonly url: AppUrl;
  readonly label: string;
}

/**
 * What a replica does with an event of one type: forward it to `target`, drop it because an
 * `--app-webhook-ignore` glob names it, or nothing: no route takes it, no ignore names it, and
 * there is no default (`unrouted`: another replica of the fleet may route it).
 */
export type Routing = { readonly kind: 'forward'; readonly target: AppTarget } | { readonly kind: 'ignored'; readonly glob: string } | { readonly kind: 'unrouted' };

/**
 * The globs of a route table, without its URLs: what a replica tells the others it takes (queue
 * mode leaves an entry its own routes do not take for a replica whose table does).
 */
export interface RouteGlobs {
  /** `--app-webhook-route` globs, in order. */
  readonly routes: readonly string[];
  /** `--app-webhook-ignore` globs. */
  readonly ignore: readonly string[];
  /** Whether `--app-webhook-url` is set (it takes every type the routes and ignores leave). */
  readonly fallback: boolean;
}

/** A glob of event types as a whole-string matcher (`*`: any run of characters). */
export function globMatcher(glob: string): (type: string) => boolean {
  if (!glob.includes('*')) return (type) => type === glob;
  const source = glob
    .split('*')
    .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
    .join('.*');
  const re = new RegExp(`^${source}$`, 's');
  return (type) => re.test(type);
}

const UNROUTED: Routing = Object.freeze({ kind: 'unrouted' });

/**
 * The routes by event type (contract, Webhooks): the first route whose glob matches the event's
 * type takes it; else an `--app-webhook-ignore` glob that matches drops it (`ignored`); else the
 * default (`--app-webhook-url`) takes it; with none of them the event is `unrouted`, which is never
 * acknowledged and forgotten (passthrough answers 503, queue mode leaves it for a replica whose
 * routes take it). The same table serves both delivery modes and the REDEC hand-over.
 *
 * @example
 * const routes = new AppRoutes([{ glob: 'data_subject_request.*', url: new URL('http://127.0.0.1:8081/dsr') }], new URL('http://127.0.0.1:8080/hooks'), ['redec.access.*']);
 * routes.pick('data_subject_request.created')?.label; // 'data_subject_request.*'
 * routes.route('redec.access.failed'); // { kind: 'ignored', glob: 'redec.access.*' }
 */
export class AppRoutes {
  private readonly table: readonly { readonly matches: (type: string) => boolean; readonly routing: Routing }[];
  private readonly fallback: Routing;
  /** The globs of this table, as other replicas see it. */
  readonly globs: RouteGlobs;

  constructor(routes: readonly AppRouteSpec[], defaultUrl: URL | null, ignore: readonly string[] = []) {
    this.table = [
      ...routes.map((r) => ({ matches: globMatcher(r.glob), routing: Object.freeze({ kind: 'forward' as const, target: Object.freeze({ url: appUrl(r.url), label: r.glob }) }) })),
      ...ignore.map((glob) => ({ matches: globMatcher(glob), routing: Object.freeze({ kind: 'ignored' as const, glob }) })),
    ];
    this.fallback = defaultUrl ? Object.freeze({ kind: 'forward', target: Object.freeze({ url: appUrl(defaultUrl), label: 'default' }) }) : UNROUTED;
    this.globs = Object.freeze({ routes: Object.freeze(routes.map((r) => r.glob)), ignore: Object.freeze([...ignore]), fallback: defaultUrl !== null });
  }

  /** What this replica does with an event of `type`. */
  route(type: string): Routing {
    for (const r of this.table) if (r.matches(type)) return r.routing;
    return this.fallback;
  }

  /** The target of an event of `type`, or null when it is ignored or unrouted here. */
  pick(type: string): AppTarget | null {
    const r = this.route(type);
    return r.kind === 'forward' ? r.target : null;
  }

  /** Every label a forward can be counted under. */
  get labels(): string[] {
    return this.table.flatMap((r) => (r.routing.kind === 'forward' ? [r.routing.target.label] : [])).concat(this.fallback.kind === 'forward' ? [this.fallback.target.label] : []);
  }
}

/**
 * Whether a replica whose table has these globs forwards events of `type` (the same order as
 * {@link AppRoutes.route}: routes, then ignores, then the default).
 */
export function globsForward(globs: RouteGlobs, type: string): boolean {
  if (globs.routes.some((g) => globMatcher(g)(type))) return true;
  if (globs.ignore.some((g) => globMatcher(g)(type))) return false;
  return globs.fallback;
}
