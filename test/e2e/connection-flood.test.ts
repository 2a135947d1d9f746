import { spawnSync } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allow, startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { PATIENTLY, until } from '../helpers/wait.js';
import { RecordingApp, replicaFlags, ServeProcess } from '../helpers/serve-process.js';

/**
 * The webhook port faces the internet. 1,100 slow partial requests on it, against a serve limited
 * to 1,024 descriptors: the webhook listener holds at most --webhook-max-connections, turns the
 * rest away (counted: closed at once, or let go in their place when older and request-less), and
 * the decision path keeps every descriptor it needs, so cached and fresh checks still answer with a
 * decision and readiness stays 200.
 */
const FLOOD = 1100;

describe('a connection flood on the webhook port, 1,024 descriptors', () => {
  let upstream: ScriptedUpstream;
  const app = new RecordingApp();
  let serve: ServeProcess;
  const sockets: Socket[] = [];

  beforeAll(async () => {
    const probe = spawnSync('prlimit', ['--version']);
    if (probe.status !== 0) throw new Error('prlimit (util-linux) is needed to limit the descriptors of serve: apt-get install util-linux');
    upstream = await startUpstream((req) => ({ body: allow(JSON.parse(req.body).configKey as string, Date.now() + 600_000) }));
    await app.up();
    const flags = replicaFlags({ upstreamUrl: upstream.url, apiKey: 'k', appUrl: app.url, prefix: 'flood:', extra: { 'redec-reconcile-interval-ms': '0' } });
    delete flags['redis-key-prefix'];
    serve = new ServeProcess(flags, {}, ['prlimit', '--nofile=1024:1024', '--']);
    await serve.start();
  }, 60_000);

  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await serve?.stop();
    await app.down();
    await upstream?.close();
  });

  it('holds at most its cap, counts what it turned away, and the decision listener keeps answering with decisions', async () => {
    expect((await serve.check('cached-user', 'k')).json.decision).toBe('ALLOW');
    const { hostname, port } = new URL(serve.urls.webhook);
    for (let i = 0; i < FLOOD; i++) {
      const s = connect(Number(port), hostname);
      s.on('error', () => undefined);
      // A request that never finishes its headers: held until the header timeout, or turned away at the cap.
      s.on('connect', () => s.write('POST /webhooks HTTP/1.1\r\nhost: x\r\nx-service-timestamp: 1'));
      sockets.push(s);
    }
    // At the cap a newcomer of the one peer takes the place of its oldest request-less connection
    // (evicted) or, with none, is closed (refused): every one past the cap is one or the other.
    const turnedAway = async (): Promise<number> =>
      (await serve.metric('consent_sidecar_connections_refused_total', { listener: 'webhook' })) + (await serve.metric('consent_sidecar_connections_evicted_total', { listener: 'webhook' }));
    await until(async () => (await turnedAway()) >= FLOOD - 256, 'the webhook listener turning connections away');
    expect(await serve.metric('consent_sidecar_connections', { listener: 'webhook' })).toBeLessThanOrEqual(256);
    // Cached and fresh checks: a decision each, never upstream_unreachable for want of a descriptor.
    const cached = await serve.check('cached-user', 'k');
    expect([cached.status, cached.source, cached.json.decision]).toEqual([200, 'cache', 'ALLOW']);
    for (let i = 0; i < 20; i++) {
      const fresh = await serve.check(`fresh-${i}`, 'k');
      expect([fresh.status, fresh.source, fresh.json.decision]).toEqual([200, 'upstream', 'ALLOW']);
    }
    const ready = await fetch(`${serve.urls.admin}/readyz`);
    expect(ready.status).toBe(200);
    expect(serve.logs().some((l) => (l.event === 'connections_refused' || l.event === 'connections_evicted') && l.listener === 'webhook')).toBe(true);
  }, PATIENTLY.timeout * 4);
});
