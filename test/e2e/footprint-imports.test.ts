import { afterAll, describe, expect, it } from 'vitest';
import { getTestRedis, type TestRedis } from '../helpers/redis.js';
import { BUNDLE_DIR as BUNDLE, modulesLoaded, resolveHook } from '../helpers/resolve-hook.js';
import { ServeProcess } from '../helpers/serve-process.js';

/**
 * A pod pays for what it runs: a plain `serve` loads none of the tracing SDK, the Redis client,
 * grpc-js, the simulator, the demo or the one-shot commands, nor the parts of undici and
 * prom-client it does not use; with Redis or tracing configured, those come. A resolve hook in the
 * real process reports the files it loaded: the bundle's (dist/bundle/, scripts/bundle.mjs), each
 * read back as the modules it holds from the bundle's metafile, and any module outside it
 * (docs/performance.md, Footprint).
 */
const HEAVY = [
  '/@redis/client/',
  '/@opentelemetry/sdk-trace',
  '/@opentelemetry/exporter-trace-otlp-http/',
  // Neither build of the API (prom-client's process CPU metric would require the CommonJS one).
  '/@opentelemetry/api/',
  '/@grpc/grpc-js/',
  '/express/',
  '/undici/index.js',
  '/prom-client/index.js',
  '/prom-client/lib/pushgateway',
  '/dist/simulator/',
  '/dist/cli/demo',
  '/dist/cli/check',
  '/dist/cli/program',
  // undici's HTTP/2 client is required when a connection negotiates h2 (scripts/bundle.mjs,
  // lazy-http2), and TLS when a connection is made over it: an http:// upstream needs neither.
  'node:http2',
  'node:tls',
];
const hook = resolveHook([...HEAVY, BUNDLE]);
const everything = resolveHook(['file:']);
afterAll(() => {
  hook.remove();
  everything.remove();
});

const flags = { 'upstream-url': 'http://127.0.0.1:9', 'api-key': 'k', listen: '127.0.0.1:0', 'admin-listen': '127.0.0.1:0', 'api-key-check': 'off' };
/** The heavy modules a process loaded, inside the bundle's files or outside them. */
const resolved = (s: ServeProcess): string[] => modulesLoaded(s.logsText()).filter((m) => HEAVY.some((h) => m.includes(h)));

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

  it('with an https:// upstream and the API key checked: TLS when it connects, and still no HTTP/2', async () => {
    const got = await run({ 'upstream-url': 'https://127.0.0.1:9', 'api-key-check': 'on' });
    expect(got).toContain('node:tls');
    expect(got).not.toContain('node:http2');
  });

  it('runs the bundle: a plain serve loads its files and nothing from node_modules', async () => {
    const serve = new ServeProcess(flags, everything.env);
    await serve.start();
    await serve.stop();
    const urls = [...new Set([...serve.logsText().matchAll(/^RESOLVED (\S+)$/gm)].map((m) => m[1]!))];
    expect(urls.some((u) => u.includes(BUNDLE))).toBe(true);
    expect(urls.filter((u) => u.startsWith('file:') && !u.includes(BUNDLE) && !u.endsWith('/dist/cli.js') && !u.includes('resolve-hook-'))).toEqual([]);
  });

  it('with Redis: the Redis client (which requires node:tls for rediss:// as it loads), and still nothing else', async () => {
    redis = await getTestRedis();
    const got = await run({ 'redis-url': redis.url, 'redis-key-prefix': redis.prefix() });
    expect(got.some((u) => u.includes('/@redis/client/'))).toBe(true);
    expect(got.filter((u) => !u.includes('/@redis/client/') && u !== 'node:tls')).toEqual([]);
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
    expect(modulesLoaded(out.stderr).some((m) => m.includes('/dist/simulator/'))).toBe(true);
  });
});
