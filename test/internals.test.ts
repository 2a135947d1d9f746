import { createServer, request, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The guards of the internals we reach that no other test already holds (docs/design.md, "Library
// internals we reach": each row names its guard). Each assertion's message names the internal, so an
// upgrade that moves one says which, and where we reach it. npm run deps:check runs these against the
// newest published versions.

const req = createRequire(import.meta.url);
const source = (path: string): string => readFileSync(fileURLToPath(new URL(`../node_modules/${path}`, import.meta.url)), 'utf8');

describe('node', () => {
  it("socket._httpMessage is the response in flight on a server's socket (src/http/decision-listener.ts, clientErrorAnswer)", async () => {
    let seen: unknown;
    let response: ServerResponse | undefined;
    const server = createServer((rq, rs) => {
      seen = (rq.socket as unknown as { _httpMessage?: unknown })._httpMessage;
      response = rs;
      rs.end('ok');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      await new Promise<void>((resolve, reject) => {
        request({ port: (server.address() as AddressInfo).port, host: '127.0.0.1' }, (res) => res.resume().on('end', resolve)).on('error', reject).end();
      });
      expect(seen, 'node internal socket._httpMessage (src/http/decision-listener.ts) no longer holds the ServerResponse in flight').toBe(response);
      expect(typeof (response as unknown as { headersSent: boolean }).headersSent, 'node internal socket._httpMessage.headersSent').toBe('boolean');
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  it('Buffer#latin1Slice decodes bytes as toString("latin1") does (src/decision/request.ts, the cache key)', () => {
    const bytes = Buffer.from([0x31, 0x3a, 0x61, 0xe9, 0xff, 0x00, 0x7f]);
    const slice = (bytes as Buffer & { latin1Slice?: (start: number, end: number) => string }).latin1Slice;
    expect(typeof slice, 'node internal Buffer.prototype.latin1Slice (src/decision/request.ts) is gone').toBe('function');
    expect(slice!.call(bytes, 1, 6), 'node internal Buffer.prototype.latin1Slice (src/decision/request.ts) decodes otherwise').toBe(bytes.toString('latin1', 1, 6));
  });
});

describe('@redis/client', () => {
  it('a cluster client has _slots.nodeByAddress (a Map of nodes with .client) and _slots.rediscover(client) (src/redis/cluster-link.ts)', () => {
    const { createCluster } = req('@redis/client') as { createCluster(o: unknown): { _slots?: { nodeByAddress?: unknown; rediscover?: unknown } } };
    const cluster = createCluster({ rootNodes: [{ url: 'redis://127.0.0.1:1' }] });
    expect(cluster._slots?.nodeByAddress, '@redis/client internal RedisCluster._slots.nodeByAddress (src/redis/cluster-link.ts) moved').toBeInstanceOf(Map);
    expect(typeof cluster._slots?.rediscover, '@redis/client internal RedisCluster._slots.rediscover (src/redis/cluster-link.ts) moved').toBe('function');
    expect(source('@redis/client/dist/lib/cluster/cluster-slots.js'), '@redis/client internal: a slot node keeps its client as .client').toMatch(/\bnode\.client\b/);
  });

  it('requires @opentelemetry/api only inside OpenTelemetry.init (scripts/bundle.mjs keeps it out of the bundle)', () => {
    const lib = '@redis/client/dist/lib';
    const files = (readFileSync(fileURLToPath(new URL(`../node_modules/${lib}/opentelemetry/index.js`, import.meta.url)), 'utf8'));
    const init = /static init\(config\) \{[\s\S]*?\n {4}\}\n/.exec(files)?.[0] ?? '';
    expect(init, '@redis/client internal OpenTelemetry.init (scripts/bundle.mjs keep-out) moved').toContain('require("@opentelemetry/api")');
    const grep = (dir: string): string[] =>
      (req('node:fs').readdirSync(fileURLToPath(new URL(`../node_modules/${dir}`, import.meta.url)), { recursive: true }) as string[])
        .filter((f) => f.endsWith('.js'))
        .filter((f) => source(`${dir}/${f}`).includes('require("@opentelemetry/api")'));
    expect(grep(lib), '@redis/client internal: @opentelemetry/api is required outside OpenTelemetry.init (scripts/bundle.mjs keep-out would leave a require unbundled on a path that runs)').toEqual(['opentelemetry/index.js']);
  });

  it("commands/index.js exports no name the bundle's replacement lacks (scripts/bundle.mjs, redis-commands)", () => {
    const exported = new Set([...source('@redis/client/dist/lib/commands/index.js').matchAll(/\bexports\.([A-Za-z_]+) =/g)].map((m) => m[1]!));
    const bundle = readFileSync(fileURLToPath(new URL('../scripts/bundle.mjs', import.meta.url)), 'utf8');
    const ours = new Set([...bundle.matchAll(/exports\.([A-Za-z_]+) =/g)].map((m) => m[1]!));
    expect([...exported].filter((n) => !ours.has(n)), '@redis/client internal commands/index.js (scripts/bundle.mjs redis-commands) exports names the replacement does not').toEqual([]);
  });
});

describe('undici', () => {
  it("lib/dispatcher/client.js requires client-h2.js eagerly, in the line scripts/bundle.mjs makes lazy (lazy-http2)", () => {
    expect(source('undici/lib/dispatcher/client.js'), "undici internal lib/dispatcher/client.js: \"const connectH2 = require('./client-h2.js')\" (scripts/bundle.mjs lazy-http2) moved").toContain("const connectH2 = require('./client-h2.js')");
  });
});

describe('express', () => {
  it("requires supports-color inside a try: optional, so the bundle leaves it out (scripts/bundle.mjs keep-out)", () => {
    const node = source('debug/src/node.js');
    expect(node, "express internal (its debug): require('supports-color') no longer optional (scripts/bundle.mjs keep-out)").toMatch(/try \{[^}]*require\('supports-color'\)/);
  });
});
