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

/**
 * The routes by event type (contract, Webhooks): the first route whose glob matches the event's
 * type takes it, else the default (`--app-webhook-url`); with neither, the event is unrouted
 * (answered 200, counted, not forwarded). The same table serves both delivery modes and the
 * REDEC hand-over.
 *
 * @example
 * const routes = new AppRoutes([{ glob: 'data_subject_request.*', url: new URL('http://127.0.0.1:8081/dsr') }], new URL('http://127.0.0.1:8080/hooks'));
 * routes.pick('data_subject_request.created')?.label; // 'data_subject_request.*'
 */
export class AppRoutes {
  private readonly table: readonly { readonly matches: (type: string) => boolean; readonly target: AppTarget }[];
  private readonly fallback: AppTarget | null;

  constructor(routes: readonly AppRouteSpec[], defaultUrl: URL | null) {
    this.table = routes.map((r) => ({ matches: globMatcher(r.glob), target: Object.freeze({ url: appUrl(r.url), label: r.glob }) }));
    this.fallback = defaultUrl ? Object.freeze({ url: appUrl(defaultUrl), label: 'default' }) : null;
  }

  /** The target of an event of `type`, or null when no route takes it and there is no default. */
  pick(type: string): AppTarget | null {
    for (const r of this.table) if (r.matches(type)) return r.target;
    return this.fallback;
  }

  /** Every label a forward can be counted under. */
  get labels(): string[] {
    return [...this.table.map((r) => r.target.label), ...(this.fallback ? [this.fallback.label] : [])];
  }
}
