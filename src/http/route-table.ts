import type { IncomingMessage, ServerResponse } from 'node:http';

/** A route's handler on bare node:http: it owns the request from here and answers it. */
export type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * One route of a listener:
 * - `path`: matched against the request target. `exact` (the default) takes the target as it came,
 *   query included, so a hot route pays one string comparison; `path` ignores the query; `subtree`
 *   also takes any target beneath it (`/p`, `/p?…`, `/p/…`);
 * - `methods`: the methods it serves (`'*'`: any); another method gets `methodNotAllowed`, or the
 *   table's fallback when the route names none.
 */
export interface Route {
  readonly path: string;
  readonly match?: 'exact' | 'path' | 'subtree';
  readonly methods: readonly string[] | '*';
  readonly handle: Handler;
  readonly methodNotAllowed?: Handler;
}

/**
 * A listener's routes, tried in order (put the hot one first), then `fallback`: the whole router of
 * a listener on bare node:http. Nothing in it allocates per request but what a route does itself.
 *
 * @example
 * const dispatch = routeTable([{ path: '/metrics', methods: ['GET', 'HEAD'], handle: metrics }], notFound);
 * createServer(dispatch);
 */
export function routeTable(routes: readonly Route[], fallback: Handler): Handler {
  const table = routes.map((r) => ({ ...r, matches: matcher(r.path, r.match ?? 'exact') }));
  return (req, res) => {
    const url = req.url ?? '';
    for (let i = 0; i < table.length; i++) {
      const r = table[i]!;
      if (!r.matches(url)) continue;
      if (r.methods === '*' || r.methods.includes(req.method ?? '')) return r.handle(req, res);
      return (r.methodNotAllowed ?? fallback)(req, res);
    }
    fallback(req, res);
  };
}

/** The request target's path: up to the query. */
export function pathOf(url: string): string {
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

function matcher(path: string, how: 'exact' | 'path' | 'subtree'): (url: string) => boolean {
  const n = path.length;
  switch (how) {
    case 'exact':
      return (url) => url === path;
    case 'path':
      return (url) => url.startsWith(path) && (url.length === n || url.charCodeAt(n) === 0x3f /* ? */);
    case 'subtree':
      return (url) => {
        if (!url.startsWith(path)) return false;
        const next = url.charCodeAt(n);
        return Number.isNaN(next) || next === 0x2f /* / */ || next === 0x3f /* ? */;
      };
  }
}
