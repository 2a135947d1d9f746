import { spawnSync } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { IMAGE_NODE_FLAGS } from '../helpers/image.js';
import { ServeProcess } from '../helpers/serve-process.js';
import { preDeny, startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { until } from '../helpers/wait.js';

/**
 * How the image runs node (its ENTRYPOINT's flags: no Maglev, TurboFan after 10,000 calls). That no
 * optimizing job runs before a serve is ready is a property of how much runs in that window, which
 * the machine's load moves (a slow start polls and reconnects more): `npm run bench -- footprint`
 * measures it (test/bench/footprint.ts, "Optimizing jobs before ready"). Here, what the load cannot
 * move: the flags are ones this node takes, a serve gets ready under them, and they do what they say.
 */
const jobs = (log: string): string[] => log.split('\n').filter((l) => l.startsWith('[compiling method'));

describe("the image's node flags", () => {
  let upstream: ScriptedUpstream | undefined;
  afterAll(async () => {
    await upstream?.close();
  });

  it('a serve started with them gets ready and stops', async () => {
    upstream = await startUpstream({ status: 200, body: preDeny('CONFIG_NOT_FOUND') });
    const serve = new ServeProcess({ 'upstream-url': upstream.url, 'api-key': 'k', listen: '127.0.0.1:0', 'admin-listen': '127.0.0.1:0' }, {}, [], [...IMAGE_NODE_FLAGS]);
    await serve.start();
    try {
      await until(async () => (await fetch(`${serve.urls.admin}/readyz`)).status === 200, 'the serve ready');
    } finally {
      await serve.stop();
    }
    expect(serve.logsText()).toContain('"event":"stopped"');
    expect(upstream.checks).toBeGreaterThanOrEqual(1);
  });

  it('still optimizes what is hot, with TurboFan and never Maglev, and the trace names the job', () => {
    const hot = 'function inc(x) { return x + 1 } let s = 0; for (let i = 0; i < 1e6; i++) s = inc(s); if (s !== 1e6) process.exit(2)';
    const out = spawnSync(process.execPath, [...IMAGE_NODE_FLAGS, '--trace-opt', '-e', hot], { encoding: 'utf8' });
    expect(out.status, out.stderr).toBe(0);
    expect(jobs(out.stdout).some((l) => /JSFunction inc .*target TURBOFAN/.test(l))).toBe(true);
    expect(out.stdout).not.toMatch(/target MAGLEV/);
  });

  it('waits for 10,000 calls before TurboFan: a function called 5,000 times is not optimized, one called 20,000 times is', () => {
    const calls = (n: number): string => `function f${n}(x) { return x + 1 } let s = 0; for (let i = 0; i < ${n}; i++) s = f${n}(s); if (s !== ${n}) process.exit(2)`;
    const few = spawnSync(process.execPath, [...IMAGE_NODE_FLAGS, '--trace-opt', '-e', calls(5000)], { encoding: 'utf8' });
    const many = spawnSync(process.execPath, [...IMAGE_NODE_FLAGS, '--trace-opt', '-e', calls(20000)], { encoding: 'utf8' });
    expect([few.status, many.status]).toEqual([0, 0]);
    expect(jobs(few.stdout).filter((l) => /JSFunction f5000 /.test(l))).toEqual([]);
    expect(jobs(many.stdout).some((l) => /JSFunction f20000 .*target TURBOFAN/.test(l))).toBe(true);
  });
});
