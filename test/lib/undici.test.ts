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
    expect(facade.Pool).toBe(index.Pool);
    expect(facade.Agent).toBe(index.Agent);
    expect(facade.errors).toBe(index.errors);
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
