import { describe, expect, it } from 'vitest';
import { loadServeConfig, type RawFlags } from '../../src/config/index.js';
import { configProblems } from '../helpers/config.js';

// --forward-auth-user-header: the default of CONTRACT.md, lower-cased names, and bad names
// refused naming the flag (and the variable when the value came from it).

const base = { 'upstream-url': 'http://127.0.0.1:7800', 'api-key': 'k' };

const problems = configProblems;

describe('--forward-auth-user-header', () => {
  it('defaults to x-user-reference and lower-cases what it is given (flag or variable)', () => {
    expect(loadServeConfig(base, {}).forwardAuth).toEqual({ userHeader: 'x-user-reference' });
    expect(loadServeConfig({ ...base, 'forward-auth-user-header': 'X-Auth-Request-User' }, {}).forwardAuth.userHeader).toBe('x-auth-request-user');
    expect(loadServeConfig(base, { CONSENT_SIDECAR_FORWARD_AUTH_USER_HEADER: 'X-Forwarded-User' }).forwardAuth.userHeader).toBe('x-forwarded-user');
  });

  it.each<[string, RawFlags, Record<string, string>, string]>([
    ['not a header name', { ...base, 'forward-auth-user-header': 'x user' }, {}, '--forward-auth-user-header: must be an HTTP header name, got "x user"'],
    ['a colon', { ...base, 'forward-auth-user-header': 'x-user:' }, {}, '--forward-auth-user-header: must be an HTTP header name'],
    ['a header node or the proxy owns', { ...base, 'forward-auth-user-header': 'Host' }, {}, '--forward-auth-user-header: "host" cannot carry the user reference'],
    ['the configKey header', { ...base, 'forward-auth-user-header': 'x-consent-config-key' }, {}, '--forward-auth-user-header: "x-consent-config-key" cannot carry'],
    ['a bad value from the variable', base, { CONSENT_SIDECAR_FORWARD_AUTH_USER_HEADER: 'a b' }, '--forward-auth-user-header (from CONSENT_SIDECAR_FORWARD_AUTH_USER_HEADER): must be an HTTP header name'],
  ])('%s → names the flag', (_name, flags, env, expected) => {
    const found = problems(flags, env);
    expect(found.some((p) => p.startsWith(expected)), `${JSON.stringify(found)} should contain "${expected}"`).toBe(true);
  });
});
