import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import * as facade from '../../src/lib/undici.js';

// src/lib/undici.ts requires undici's parts one file each (its index also loads fetch, WebSocket,
// the caches and the mocks): each must be the very object the index exports, and the request API
// must be on a dispatcher as the index puts it there.
describe('undici, one file each', () => {
  it('Pool, Agent and errors are the index\'s own', () => {
    const index = createRequire(import.meta.url)('undici') as Record<string, unknown>;
    expect(facade.Pool, "undici internal 'undici/lib/dispatcher/pool' (src/lib/undici.ts) is not the index's Pool").toBe(index.Pool);
    expect(facade.Agent, "undici internal 'undici/lib/dispatcher/agent' (src/lib/undici.ts) is not the index's Agent").toBe(index.Agent);
    expect(facade.errors, "undici internal 'undici/lib/core/errors' (src/lib/undici.ts) is not the index's errors").toBe(index.errors);
    // The index puts lib/api's methods on lib/dispatcher/dispatcher's prototype; so does the facade.
    const api = createRequire(import.meta.url)('undici/lib/api') as Record<string, unknown>;
    expect(Object.keys(api).sort(), "undici internal 'undici/lib/api' (src/lib/undici.ts) offers other methods").toEqual(expect.arrayContaining(['request', 'stream', 'pipeline', 'connect', 'upgrade']));
    for (const m of Object.keys(api)) {
      expect((index.Pool as { prototype: Record<string, unknown> }).prototype[m], `undici internal 'undici/lib/api'.${m} is not on the index's dispatchers (src/lib/undici.ts)`).toBe(api[m]);
    }
  });

  it('a Pool and request() reach a real server', async () => {
    const server = createServer((req, res) => res.end(`${req.method} ${req.url}`));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const pool = new facade.Pool(origin);
      const a = await pool.request({ method: 'GET', path: '/pool?x=1' });
      expect(await a.body.text()).toBe('GET /pool?x=1');
      await pool.close();
      const b = await facade.request(`${origin}/request?y=2`, { method: 'POST', body: 'x' });
      expect([b.statusCode, await b.body.text()]).toEqual([200, 'POST /request?y=2']);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
