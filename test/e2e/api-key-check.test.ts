import { afterEach, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatorHandle } from '../../src/simulator/index.js';
import { freePort } from '../helpers/ports.js';
import { sampleOf } from '../helpers/sidecar.js';
import { until } from '../helpers/wait.js';
import { startCli } from '../helpers/cli.js';

// `serve --api-key wrong`, as a newcomer runs it against the simulator: the first thing it logs
// after starting is the rejected key, naming the flag and never the key, while /readyz stays 200
// (decisions fail closed anyway).

let sim: SimulatorHandle | undefined;
let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  await sim?.close();
  [sim, stop] = [undefined, undefined];
});

describe('serve checks the API key at start', () => {
  it('serve --api-key wrong logs upstream_rejects_api_key at error on its first probe, naming --api-key; readiness unchanged', async () => {
    sim = await startSimulator();
    const admin = await freePort();
    const key = 'sk_live_not_this_one_42';
    const serve = await startCli(
      ['serve', '--upstream-url', sim.url, '--api-key', key, '--listen', '127.0.0.1:0', '--admin-listen', `127.0.0.1:${admin}`],
      /"event":"upstream_rejects_api_key"/,
    );
    stop = async () => {
      serve.child.kill('SIGTERM');
      await serve.exited;
    };
    const line = JSON.parse(serve.line) as Record<string, unknown>;
    // The first probe, made at start (not after a backoff): attempt 1.
    expect(line).toMatchObject({ level: 'error', event: 'upstream_rejects_api_key', flag: '--api-key', status: '401', attempt: 1 });
    expect(String(line.msg)).toContain('--api-key');
    expect(serve.output()).not.toContain(key);
    const lines = serve.output().split('\n').filter(Boolean).map((l) => JSON.parse(l) as { event?: string });
    expect(lines.findIndex((l) => l.event === 'upstream_rejects_api_key')).toBeLessThanOrEqual(lines.findIndex((l) => l.event === 'started') + 1);
    // A plain serve (no --app-webhook-url) says nothing about REDEC.
    expect(serve.output()).not.toContain('redec');
    const ready = await fetch(`http://127.0.0.1:${admin}/readyz`);
    expect(ready.status).toBe(200);
    await until(async () => sampleOf(await (await fetch(`http://127.0.0.1:${admin}/metrics`)).text(), 'consent_sidecar_upstream_api_key_rejected') === 1, 'the gauge says rejected');
  });
});
