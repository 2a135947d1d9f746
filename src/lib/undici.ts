import { createRequire } from 'node:module';
import type * as Undici from 'undici';

/**
 * The parts of undici the sidecar uses, required one file each. Its index also loads fetch, the
 * WebSocket client, the caches and the mocks: about 13 MiB of RSS a pod would pay for nothing
 * (docs/performance.md, Footprint). As the index does, the request API is put on every
 * dispatcher's prototype. The paths are pinned by undici's version in package-lock.json, and
 * test/lib/undici.test.ts holds each to be the very object the index exports, so an upgrade that
 * moves one fails the suite instead of the sidecar.
 */
const req = createRequire(import.meta.url);
Object.assign((req('undici/lib/dispatcher/dispatcher') as { prototype: object }).prototype, req('undici/lib/api'));

export const Pool = req('undici/lib/dispatcher/pool') as typeof Undici.Pool;
export const Agent = req('undici/lib/dispatcher/agent') as typeof Undici.Agent;
export const errors = req('undici/lib/core/errors') as typeof Undici.errors;
export type Pool = Undici.Pool;
export type Agent = Undici.Agent;
export type { Dispatcher } from 'undici';

let agent: Undici.Agent | undefined;

/**
 * One request to `url` on a shared agent of kept-alive connections, as undici's own `request`
 * (which uses its global dispatcher) makes it.
 */
export function request(url: string | URL, options: Omit<Undici.Dispatcher.RequestOptions, 'origin' | 'path' | 'method'> & { method?: Undici.Dispatcher.HttpMethod }): Promise<Undici.Dispatcher.ResponseData> {
  const u = typeof url === 'string' ? new URL(url) : url;
  agent ??= new Agent();
  return agent.request({ ...options, origin: u.origin, path: `${u.pathname}${u.search}`, method: options.method ?? 'GET' });
}
