import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadServeConfig, resolveUpstreamConfig, type RawFlags } from '../../src/config/index.js';
import { redisSecrets } from '../../src/config/index.js';
import { configProblems } from '../helpers/config.js';

const base = { 'upstream-url': 'https://consent.example/api', 'api-key': 'k-123' };

const problems = configProblems;

function tempFile(content: string): string {
  const path = join(mkdtempSync(join(tmpdir(), 'cs-config-')), 'secret');
  writeFileSync(path, content);
  return path;
}

describe('loadServeConfig', () => {
  it('applies the contract defaults', () => {
    const c = loadServeConfig(base, {});
    expect(c.listeners.decision).toEqual({ host: '127.0.0.1', port: 7700 });
    expect(c.listeners.webhook).toEqual({ host: '0.0.0.0', port: 7701 });
    expect(c.listeners.admin).toEqual({ host: '0.0.0.0', port: 7702 });
    expect(c.upstream.timeoutMs).toBe(2000);
    expect(c.cache).toEqual({ maxEntries: 100_000, safetyMarginMs: 1000, maxTtlMs: 3_600_000, refreshAheadMs: 0 });
    expect(c.webhooks).toBeNull();
    expect(c.logLevel).toBe('info');
    expect(Object.isFrozen(c)).toBe(true);
    expect(c.upstream.apiKey.current()).toBe('k-123');
  });

  it('reads CONSENT_SIDECAR_* variables, and a flag wins over its variable', () => {
    const env = { CONSENT_SIDECAR_UPSTREAM_URL: 'http://svc:8080', CONSENT_SIDECAR_API_KEY: 'env-key', CONSENT_SIDECAR_CACHE_MAX_ENTRIES: '5' };
    const fromEnv = loadServeConfig({}, env);
    expect(fromEnv.upstream.baseUrl.href).toBe('http://svc:8080/');
    expect(fromEnv.cache.maxEntries).toBe(5);
    expect(loadServeConfig({ 'cache-max-entries': '7' }, env).cache.maxEntries).toBe(7);
  });

  it.each<[string, RawFlags, Record<string, string>, string[]]>([
    ['nothing given', {}, {}, ['--upstream-url: is required', '--api-key: one of --api-key or --api-key-file is required']],
    ['a bad URL', { ...base, 'upstream-url': 'consent.example' }, {}, ['--upstream-url: is not a valid URL']],
    ['a non-http URL', { ...base, 'upstream-url': 'ftp://x' }, {}, ['--upstream-url: must be an http:// or https:// URL']],
    ['credentials in the URL', { ...base, 'upstream-url': 'https://u:p@x' }, {}, ['--upstream-url: must not carry credentials']],
    ['key and key file', { ...base, 'api-key-file': '/x' }, {}, ['--api-key: give the secret as --api-key or --api-key-file, not both']],
    ['an unreadable key file', { 'upstream-url': 'http://x', 'api-key-file': '/nonexistent/key' }, {}, ['--api-key-file: cannot read /nonexistent/key: ENOENT']],
    ['a non-integer timeout', { ...base, 'upstream-timeout-ms': '2s' }, {}, ['--upstream-timeout-ms: must be an integer from 1 to 600000, got "2s"']],
    ['a bad value from a variable', base, { CONSENT_SIDECAR_CACHE_MAX_TTL_MS: '-5' }, ['--cache-max-ttl-ms (from CONSENT_SIDECAR_CACHE_MAX_TTL_MS): must be an integer']],
    ['a bad listen address', { ...base, listen: 'localhost' }, {}, ['--listen: expected host:port']],
    ['two listeners on one port', { ...base, 'admin-listen': '127.0.0.1:7700' }, {}, ['--admin-listen: uses the same port as --listen (7700)']],
    ['a bad log level', { ...base, 'log-level': 'verbose' }, {}, ['--log-level: must be one of fatal, error, warn, info, debug, trace, silent']],
    ['secrets without an app URL', { ...base, 'webhook-secret': ['whsec_a'] }, {}, ['--app-webhook-url: is required when webhook secrets']],
    ['an app URL without secrets', { ...base, 'app-webhook-url': 'http://127.0.0.1:8080/h' }, {}, ['--webhook-secret: one of --webhook-secret or --webhook-secret-file is required']],
    ['a secret without whsec_', { ...base, 'app-webhook-url': 'http://127.0.0.1:8080/h', 'webhook-secret': ['whsec_ok', 'nope'] }, {}, ['--webhook-secret: secret #2 does not start with "whsec_"']],
    ['a forbidden required header', { ...base, 'app-webhook-url': 'http://a/h', 'webhook-secret': ['whsec_a'], 'webhook-required-header': 'X-Service-Foo: 1' }, {}, ['--webhook-required-header: "X-Service-Foo" cannot be a custom header']],
    // Queue mode exists now (issue 10); without Redis it has nowhere to keep events, and says which flag is missing.
    ['queue mode without Redis', { ...base, 'app-webhook-url': 'http://a/h', 'webhook-secret': ['whsec_a'], 'webhook-delivery': 'queue' }, {}, ['--redis-url: is required with --webhook-delivery queue']],
    ['a horizon that is not a number', { ...base, 'webhook-queue-horizon-ms': 'soon' }, {}, ['--webhook-queue-horizon-ms:']],
    ['an unknown delivery mode', { ...base, 'app-webhook-url': 'http://a/h', 'webhook-secret': ['whsec_a'], 'webhook-delivery': 'kafka' }, {}, ['--webhook-delivery: must be one of passthrough, queue']],
    ['a non-redis URL', { ...base, 'redis-url': 'http://r:6379' }, {}, ['--redis-url: must be a redis:// or rediss:// URL']],
    // Issue 20: what the Redis client would refuse only when it connects (exit 1, "Invalid pathname").
    ['a Redis database that is not a number', { ...base, 'redis-url': 'redis://r:6379/notanumber' }, {}, ['--redis-url: the path must be a database number']],
    ['a Redis database that is not an integer', { ...base, 'redis-url': 'redis://r:6379/1.5' }, {}, ['--redis-url: the path must be a database number']],
    ['a Redis URL without a host', { ...base, 'redis-url': 'redis:///0' }, {}, ['--redis-url: must name a host']],
    ['a Redis password with a bad escape', { ...base, 'redis-url': 'redis://:%zz@r:6379' }, {}, ['--redis-url: the credentials hold an invalid percent-escape']],
    ['Redis URL and URL file', { ...base, 'redis-url': 'redis://r:6379', 'redis-url-file': '/x' }, {}, ['--redis-url: give the secret as --redis-url or --redis-url-file, not both']],
    ['a dedup lease not above the forward timeout', { ...base, 'app-webhook-url': 'http://a/h', 'webhook-secret': ['whsec_a'], 'webhook-forward-timeout-ms': '3000', 'webhook-dedup-lease-ms': '3000' }, {}, ['--webhook-dedup-lease-ms: must exceed --webhook-forward-timeout-ms (3000)']],
    ['a Redis command timeout of 0', { ...base, 'redis-url': 'redis://r:6379', 'redis-command-timeout-ms': '0' }, {}, ['--redis-command-timeout-ms: must be an integer from 1']],
    ['a key prefix with a space', { ...base, 'redis-url': 'redis://r:6379', 'redis-key-prefix': 'a b' }, {}, ['--redis-key-prefix: must be at most 128 printable characters']],
  ])('%s → names the flag', (_name, flags, env, expected) => {
    const found = problems(flags, env);
    for (const e of expected) expect(found.some((p) => p.startsWith(e)), `${JSON.stringify(found)} should contain "${e}"`).toBe(true);
  });

  it('a bad Redis URL in the file form names --redis-url-file (issue 20)', () => {
    expect(problems({ ...base, 'redis-url-file': tempFile('redis://r:6379/db1\n') })).toEqual([expect.stringMatching(/^--redis-url-file: .*the path must be a database number/)]);
  });

  it('reports every problem at once', () => {
    expect(problems({ 'upstream-timeout-ms': 'x', 'cache-max-entries': 'y', listen: 'z' }).length).toBeGreaterThanOrEqual(5);
  });

  it('enables the webhook ingress with secrets from flags, variables (comma or newline) and files', () => {
    const flags = { ...base, 'app-webhook-url': 'http://127.0.0.1:8080/webhooks', 'webhook-secret': ['whsec_one', 'whsec_two'] };
    expect(loadServeConfig(flags, {}).webhooks?.secrets.current()).toEqual(['whsec_one', 'whsec_two']);
    const env = { CONSENT_SIDECAR_WEBHOOK_SECRET: 'whsec_a,whsec_b' };
    expect(loadServeConfig({ ...base, 'app-webhook-url': 'http://a/h' }, env).webhooks?.secrets.current()).toEqual(['whsec_a', 'whsec_b']);
    const file = tempFile('# rotated 2026-11\nwhsec_new\n\nwhsec_old\n');
    const w = loadServeConfig({ ...base, 'app-webhook-url': 'http://a/h', 'webhook-secret-file': file }, {}).webhooks!;
    expect(w.secrets.current()).toEqual(['whsec_new', 'whsec_old']);
    expect(w.path).toBe('/webhooks');
    expect(w.toleranceS).toBe(300);
    expect(w.maxBodyBytes).toBe(1_048_576);
    expect(w.forwardTimeoutMs).toBe(10_000);
    expect(w.delivery).toBe('passthrough');
  });

  it('queue mode with Redis: accepted, the horizon defaults to 72 h and reads its flag and variable', () => {
    const flags = { ...base, 'app-webhook-url': 'http://a/h', 'webhook-secret': ['whsec_a'], 'webhook-delivery': 'queue', 'redis-url': 'redis://r:6379' };
    const c = loadServeConfig(flags, {});
    expect(c.webhooks?.delivery).toBe('queue');
    expect(c.webhooks?.queueHorizonMs).toBe(259_200_000);
    expect(loadServeConfig({ ...flags, 'webhook-queue-horizon-ms': '5000' }, {}).webhooks?.queueHorizonMs).toBe(5000);
    expect(loadServeConfig(flags, { CONSENT_SIDECAR_WEBHOOK_QUEUE_HORIZON_MS: '7000' }).webhooks?.queueHorizonMs).toBe(7000);
    for (const x of c.redis ? redisSecrets(c.redis) : []) x.close();
  });

  it('reads Redis from a URL or a mounted file (re-read on rotation), with defaults; never echoes the URL', async () => {
    expect(loadServeConfig(base, {}).redis).toBeNull();
    const c = loadServeConfig({ ...base, 'redis-url': 'rediss://:pw@r:6380/0' }, {});
    const url = (r: typeof c.redis) => (r?.target.kind === 'single' ? r.target.url : null);
    expect(url(c.redis)?.current().href).toBe('rediss://:pw@r:6380/0');
    expect(c.redis?.keyPrefix).toBe('consent-sidecar:');
    expect(c.redis?.commandTimeoutMs).toBe(500);
    const file = tempFile('redis://:first@r:6379\n');
    const f = loadServeConfig({ ...base, 'redis-url-file': file, 'redis-key-prefix': 'tenant-a:' }, {}).redis!;
    expect(url(f)!.current().password).toBe('first');
    expect(f.keyPrefix).toBe('tenant-a:');
    url(f)!.watch(20, () => undefined);
    writeFileSync(file, 'redis://:second@r:6379\n');
    await expect.poll(() => url(f)!.current().password).toBe('second');
    url(f)!.close();
    expect(problems({ ...base, 'redis-url': 'http://:hunter2@r:6379' }).join('\n')).not.toContain('hunter2');
  });

  it('gives the dedup lease the forward timeout + 5 s by default', () => {
    const w = loadServeConfig({ ...base, 'app-webhook-url': 'http://a/h', 'webhook-secret': ['whsec_a'], 'webhook-forward-timeout-ms': '3000' }, {}).webhooks!;
    expect(w.dedupLeaseMs).toBe(8000);
  });

  it('parses the required header, lower-casing its name', () => {
    const flags = { ...base, 'app-webhook-url': 'http://a/h', 'webhook-secret': ['whsec_a'], 'webhook-required-header': 'Authorization: Basic abc:def' };
    expect(loadServeConfig(flags, {}).webhooks?.requiredHeader?.current()).toEqual({ name: 'authorization', value: 'Basic abc:def' });
  });

  it('never puts a secret in a problem message', () => {
    const all = problems({ 'api-key': 'super secret key', 'upstream-url': 'x' }).join('\n');
    expect(all).not.toContain('super secret key');
  });
});

describe('secret files', () => {
  it('re-reads a rotated file and keeps the last good value on a bad one', async () => {
    const file = tempFile('key-one\n');
    const c = resolveUpstreamConfig({ 'upstream-url': 'http://x', 'api-key-file': file }, {});
    expect(c.apiKey.current()).toBe('key-one');
    const events: string[] = [];
    c.apiKey.watch(20, (e) => events.push(e.kind));
    writeFileSync(file, 'key-two\n');
    await expect.poll(() => c.apiKey.current()).toBe('key-two');
    writeFileSync(file, '   \n');
    await expect.poll(() => events.includes('reload_failed')).toBe(true);
    expect(c.apiKey.current()).toBe('key-two');
    c.apiKey.close();
  });
});

describe('secret reload metrics', () => {
  it('count failed re-reads per secret and keep the last good value when the file empties or disappears', async () => {
    const { rmSync } = await import('node:fs');
    const { createRegistry, silentLogger } = await import('../../src/observability/index.js');
    const { watchSecrets } = await import('../../src/config/index.js');
    const file = tempFile('key-one\n');
    const c = resolveUpstreamConfig({ 'upstream-url': 'http://x', 'api-key-file': file }, {});
    const registry = createRegistry({ defaultMetrics: false });
    let nowMs = 1_700_000_000_000;
    watchSecrets([c.apiKey], { intervalMs: 20, logger: silentLogger(), registry, now: () => nowMs });
    const value = async (name: string): Promise<number | undefined> =>
      (await registry.getSingleMetric(name)!.get()).values.find((v) => v.labels.secret === 'api_key')?.value;
    try {
      expect(await value('consent_sidecar_secret_reload_failures_total')).toBe(0);
      expect(await value('consent_sidecar_secret_last_reload_timestamp_seconds')).toBe(1_700_000_000);
      nowMs += 60_000;
      writeFileSync(file, 'key-two\n');
      await expect.poll(() => value('consent_sidecar_secret_last_reload_timestamp_seconds')).toBe(1_700_000_060);
      writeFileSync(file, '');
      await expect.poll(() => value('consent_sidecar_secret_reload_failures_total')).toBeGreaterThanOrEqual(1);
      rmSync(file);
      const before = (await value('consent_sidecar_secret_reload_failures_total'))!;
      await expect.poll(() => value('consent_sidecar_secret_reload_failures_total')).toBeGreaterThan(before);
      expect(c.apiKey.current()).toBe('key-two');
      expect(await value('consent_sidecar_secret_last_reload_timestamp_seconds')).toBe(1_700_000_060);
    } finally {
      c.apiKey.close();
    }
  });

  it('a secret given as a value has no reload series (it cannot fail to reload)', async () => {
    const { createRegistry, silentLogger } = await import('../../src/observability/index.js');
    const { watchSecrets } = await import('../../src/config/index.js');
    const c = resolveUpstreamConfig({ 'upstream-url': 'http://x', 'api-key': 'k' }, {});
    const registry = createRegistry({ defaultMetrics: false });
    watchSecrets([c.apiKey], { intervalMs: 20, logger: silentLogger(), registry, now: Date.now });
    expect(await registry.metrics()).not.toMatch(/secret="api_key"/);
  });
});
