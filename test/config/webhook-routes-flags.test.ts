import { describe, expect, it } from 'vitest';
import { loadServeConfig, type RawFlags } from '../../src/config/index.js';
import { configProblems } from '../helpers/config.js';

// The routes by event type: --app-webhook-route 'GLOB=URL' and --app-webhook-ignore GLOB, both repeatable.

const base = { 'upstream-url': 'https://consent.example/api', 'api-key': 'k-123', 'webhook-secret': ['whsec_a'] };
const route = { 'app-webhook-route': ['consent_action.*=http://127.0.0.1:8081/h'] };

describe('--app-webhook-route and --app-webhook-ignore', () => {
  it('read in the order given, from flags or one per line from the variables', () => {
    const w = loadServeConfig({ ...base, 'app-webhook-route': ['a.*=http://127.0.0.1:1/a', 'b=http://127.0.0.1:2/b'], 'app-webhook-ignore': ['internal.*', 'redec.access.*'] }, {}).webhooks!;
    expect(w.routes.map((r) => [r.glob, r.url.href])).toEqual([
      ['a.*', 'http://127.0.0.1:1/a'],
      ['b', 'http://127.0.0.1:2/b'],
    ]);
    expect(w.ignore).toEqual(['internal.*', 'redec.access.*']);
    const env = { CONSENT_SIDECAR_APP_WEBHOOK_ROUTE: 'a.*=http://127.0.0.1:1/a', CONSENT_SIDECAR_APP_WEBHOOK_IGNORE: 'internal.*\nredec.access.*' };
    expect(loadServeConfig(base, env).webhooks!.ignore).toEqual(['internal.*', 'redec.access.*']);
    // A flag wins over its variable.
    expect(loadServeConfig({ ...base, 'app-webhook-ignore': ['x.*'] }, env).webhooks!.ignore).toEqual(['x.*']);
  });

  it('default to none', () => {
    expect(loadServeConfig({ ...base, 'app-webhook-url': 'http://127.0.0.1:8080/h' }, {}).webhooks).toMatchObject({ routes: [], ignore: [] });
  });

  it.each<[string, RawFlags, string]>([
    ['an ignore glob with a character no type holds', { ...base, ...route, 'app-webhook-ignore': ['internal events'] }, '--app-webhook-ignore: expected a GLOB made of event type characters and *, got "internal events"'],
    ['an ignore glob given twice', { ...base, ...route, 'app-webhook-ignore': ['x.*', 'x.*'] }, '--app-webhook-ignore: "x.*" is given twice'],
    ['ignores with the ingress off', { ...base, 'app-webhook-ignore': ['x.*'] }, '--app-webhook-ignore: needs --app-webhook-url or --app-webhook-route'],
    ['a route without "="', { ...base, 'app-webhook-route': ['consent_action.*'] }, "--app-webhook-route: expected 'GLOB=URL'"],
  ])('%s → names the flag', (_name, flags, expected) => {
    const found = configProblems(flags);
    expect(found.some((p) => p.startsWith(expected)), `${JSON.stringify(found)} should contain "${expected}"`).toBe(true);
  });

  it('a bad ignore from the variable names the variable', () => {
    const found = configProblems({ ...base, ...route }, { CONSENT_SIDECAR_APP_WEBHOOK_IGNORE: 'in valid' });
    expect(found).toContain('--app-webhook-ignore (from CONSENT_SIDECAR_APP_WEBHOOK_IGNORE): expected a GLOB made of event type characters and *, got "in valid"');
  });
});
