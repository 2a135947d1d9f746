import { afterAll, describe, expect, it } from 'vitest';
import { getTestRedis, type TestRedis } from '../helpers/redis.js';
import { resolveHook } from '../helpers/resolve-hook.js';
import { ServeProcess } from '../helpers/serve-process.js';

/**
 * A pod pays for what it runs: a plain `serve` resolves none of the tracing SDK, the Redis client,
 * grpc-js, the simulator, the demo or the one-shot commands, nor the parts of undici and
 * prom-client it does not use; with Redis or tracing configured, those come. A resolve hook in the
 * real process reports what was loaded (docs/performance.md, Footprint).
 */
const HEAVY = [
  '/@redis/client/',
  '/@opentelemetry/sdk-trace',
  '/@opentelemetry/exporter-trace-otlp-http/',
  // prom-client's process CPU metric requires the API's CommonJS build; with tracing off, its ES module build stays out.
  '/@opentelemetry/api/dist/index.mjs',
  '/@grpc/grpc-js/',
  '/express/',
  '/undici/index.js',
  '/prom-client/index.js',
  '/prom-client/lib/pushgateway',
  '/dist/simulator/',
  '/dist/cli/demo',
  '/dist/cli/check',
  '/dist/cli/program',
];
const hook = resolveHook(HEAVY);
afterAll(() => hook.remove());

const flags = { 'upstream-url': 'http://127.0.0.1:9', 'api-key': 'k', listen: '127.0.0.1:0', 'admin-listen': '127.0.0.1:0', 'api-key-check': 'off' };
const resolved = (s: ServeProcess): string[] => [...s.logsText().matchAll(/^RESOLVED (\S+)$/gm)].map((m) => m[1]!);

async function run(extra: Record<string, string>, env: Record<string, string> = {}): Promise<string[]> {
  const serve = new ServeProcess({ ...flags, ...extra }, { ...hook.env, ...env });
  await serve.start();
  await serve.stop();
  // The imports come before the listeners start, long before the exit.
  expect(serve.logsText()).toContain('"event":"stopped"');
  return resolved(serve);
}

describe('what a serve loads', () => {
  let redis: TestRedis | undefined;
  afterAll(() => redis?.stop());

  it('a plain serve: none of the heavy modules', async () => {
    expect(await run({})).toEqual([]);
  });

  it('with Redis: the Redis client, and still nothing else', async () => {
    redis = await getTestRedis();
    const got = await run({ 'redis-url': redis.url, 'redis-key-prefix': redis.prefix() });
    expect(got.some((u) => u.includes('/@redis/client/'))).toBe(true);
    expect(got.filter((u) => !u.includes('/@redis/client/'))).toEqual([]);
  });

  it('with tracing on: the SDK and its exporter', async () => {
    const got = await run({}, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' });
    expect(got.some((u) => u.includes('/@opentelemetry/sdk-trace'))).toBe(true);
    expect(got.some((u) => u.includes('/@opentelemetry/exporter-trace-otlp-http/'))).toBe(true);
    expect(got.filter((u) => !u.includes('/@opentelemetry/'))).toEqual([]);
  });
});

// The hook itself is proven to report: a command that does load the simulator says so.
describe('the resolve hook', () => {
  it('reports a module that is loaded', async () => {
    const { spawnSync } = await import('node:child_process');
    const out = spawnSync(process.execPath, ['dist/cli.js', 'simulate', '--help'], { env: { PATH: process.env.PATH ?? '', ...hook.env }, encoding: 'utf8' });
    expect(out.stderr).toMatch(/RESOLVED \S+\/dist\/simulator\//);
  });
});
