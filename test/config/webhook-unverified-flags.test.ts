import { describe, expect, it } from 'vitest';
import { loadServeConfig, type RawFlags } from '../../src/config/index.js';
import { configProblems } from '../helpers/config.js';

// The flags that bound unauthenticated load on the webhook ingress (issue 8, item 3).

const base = { 'upstream-url': 'https://consent.example/api', 'api-key': 'k-123', 'app-webhook-url': 'http://127.0.0.1:8080/h', 'webhook-secret': ['whsec_a'] };

const problems = configProblems;

describe('--webhook-max-unverified-bytes and --webhook-body-timeout-ms', () => {
  it('default to 16 MiB and 10 s', () => {
    const w = loadServeConfig(base, {}).webhooks!;
    expect(w.maxUnverifiedBytes).toBe(16_777_216);
    expect(w.bodyTimeoutMs).toBe(10_000);
  });

  it('read their flags and variables, a flag winning', () => {
    const env = { CONSENT_SIDECAR_WEBHOOK_MAX_UNVERIFIED_BYTES: '2097152', CONSENT_SIDECAR_WEBHOOK_BODY_TIMEOUT_MS: '2500' };
    expect(loadServeConfig(base, env).webhooks).toMatchObject({ maxUnverifiedBytes: 2_097_152, bodyTimeoutMs: 2500 });
    expect(loadServeConfig({ ...base, 'webhook-body-timeout-ms': '700' }, env).webhooks?.bodyTimeoutMs).toBe(700);
  });

  it.each<[string, RawFlags, string]>([
    ['a non-integer budget', { ...base, 'webhook-max-unverified-bytes': '16MiB' }, '--webhook-max-unverified-bytes: must be an integer'],
    ['a budget below 1 KiB', { ...base, 'webhook-max-unverified-bytes': '10' }, '--webhook-max-unverified-bytes: must be an integer from 1024'],
    ['a budget below the largest body', { ...base, 'webhook-max-unverified-bytes': '65536' }, '--webhook-max-unverified-bytes: must be at least --webhook-max-body-bytes (1048576)'],
    ['a zero body timeout', { ...base, 'webhook-body-timeout-ms': '0' }, '--webhook-body-timeout-ms: must be an integer from 1'],
  ])('%s → names the flag', (_name, flags, expected) => {
    const found = problems(flags);
    expect(found.some((p) => p.startsWith(expected)), `${JSON.stringify(found)} should contain "${expected}"`).toBe(true);
  });

  it('a budget equal to a lowered body limit is fine', () => {
    const w = loadServeConfig({ ...base, 'webhook-max-body-bytes': '65536', 'webhook-max-unverified-bytes': '65536' }, {}).webhooks!;
    expect(w).toMatchObject({ maxBodyBytes: 65_536, maxUnverifiedBytes: 65_536 });
  });
});
