import { createRequire } from 'node:module';
import type * as Http from 'node:http';

/**
 * `node:http`, loaded with `require`. An ESM import of it builds the module's namespace, which
 * reads every export, lazy ones included (`WebSocket` and its events: Node's own copy of undici):
 * about 11 MiB of RSS a sidecar never uses (measured on Node 24: an http server imported 58-60
 * MiB, required 46-47; docs/performance.md, Footprint). Types come from `node:http` as usual.
 */
const http = createRequire(import.meta.url)('node:http') as typeof Http;

export const createServer = http.createServer;
export const STATUS_CODES = http.STATUS_CODES;
