import { spawnSync } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { IMAGE_NODE_FLAGS } from '../helpers/image.js';
import { getTestRedis, type TestRedis } from '../helpers/redis.js';
import { ServeProcess } from '../helpers/serve-process.js';
import { preDeny, startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { until } from '../helpers/wait.js';

/**
 * How the image runs node (its ENTRYPOINT's flags: no Maglev, TurboFan after 10,000 calls): no
 * optimizing compiler runs before a serve is ready, so neither compiler's code is paged in at idle
 * (docs/performance.md, Footprint). `--trace-opt` names every optimizing job V8 starts. A start-up
 * change that runs something hot enough (a loop over thousands of items, hundreds of module
 * resolutions) makes this fail, and the footprint bench says what it costs.
 */
const jobs = (log: string): string[] => log.split('\n').filter((l) => l.startsWith('[compiling method'));

describe("the image's node flags", () => {
  let upstream: ScriptedUpstream | undefined;
  let redis: TestRedis | undefined;
  afterAll(async () => {
    await upstream?.close();
    await redis?.stop();
  });

  async function readyJobs(flags: Record<string, string>, env: Record<string, string> = {}): Promise<string[]> {
    upstream ??= await startUpstream({ status: 200, body: preDeny('CONFIG_NOT_FOUND') });
    const serve = new ServeProcess({ 'upstream-url': upstream.url, 'api-key': 'k', listen: '127.0.0.1:0', 'admin-listen': '127.0.0.1:0', ...flags }, env, [], [...IMAGE_NODE_FLAGS, '--trace-opt']);
    await serve.start();
    try {
      // Ready: listeners up and the start-up key probe answered (undici's first connection made).
      await until(async () => (await fetch(`${serve.urls.admin}/readyz`)).status === 200, 'the serve ready');
    } finally {
      await serve.stop();
    }
    // Read once it has exited, every line written: from start to a stop right after ready.
    expect(serve.logsText()).toContain('"event":"stopped"');
    return jobs(serve.logsText());
  }

  it('a plain serve gets ready (and stops) without one optimizing job', async () => {
    expect(await readyJobs({})).toEqual([]);
    expect(upstream!.checks).toBeGreaterThanOrEqual(1);
  });

  it('a serve with Redis and tracing gets ready (and stops) without one optimizing job', async () => {
    redis = await getTestRedis();
    expect(await readyJobs({ 'redis-url': redis.url, 'redis-key-prefix': redis.prefix() }, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' })).toEqual([]);
  });

  it('still optimizes what is hot, and the trace names the job (the check above can fail)', () => {
    const hot = 'function inc(x) { return x + 1 } let s = 0; for (let i = 0; i < 1e6; i++) s = inc(s); if (s !== 1e6) process.exit(2)';
    const out = spawnSync(process.execPath, [...IMAGE_NODE_FLAGS, '--trace-opt', '-e', hot], { encoding: 'utf8' });
    expect(out.status, out.stderr).toBe(0);
    expect(jobs(out.stdout).some((l) => /JSFunction inc .*target TURBOFAN/.test(l))).toBe(true);
    expect(out.stdout).not.toMatch(/target MAGLEV/);
  });
});
