import { describe, expect, it } from 'vitest';
import { ConfigError, loadServeConfig, resolveRedecListingFields } from '../../src/config/index.js';
import { configProblems } from '../helpers/config.js';

const BASE = { 'upstream-url': 'http://127.0.0.1:7800', 'api-key': 'k' };
/** The app that obligations are handed to: where REDEC is in use, so the reconciler is on by default. */
const APP = { 'app-webhook-url': 'http://127.0.0.1:8080/webhooks', 'webhook-secret': 'whsec_redec_flags' };

const problems = (flags: Record<string, string>, env: Record<string, string> = {}): string[] => configProblems({ ...BASE, ...flags }, env);

describe('REDEC reconciliation flags', () => {
  // The reconciler hands obligations to --app-webhook-url: with it, on by default; the defaults were
  // asserted on BASE alone until a plain serve stopped listing REDEC for tenants that do not use it.
  it('defaults with --app-webhook-url: on every 300000 ms, grace 7200000, repeat 86400000, page 100, items auto, cursor "cursor"', () => {
    expect(loadServeConfig({ ...BASE, ...APP }, {}).redecReconcile).toEqual({
      intervalMs: 300_000,
      graceMs: 7_200_000,
      repeatMs: 86_400_000,
      pageLimit: 100,
      fields: { itemsField: null, cursorParam: 'cursor' },
      // Issue 20: the listing's bounds are defaults of the reconciler too.
      bounds: { maxPageBytes: 8_388_608, maxRecords: 100_000, maxListingBytes: 67_108_864 },
    });
  });

  it('without --app-webhook-url the reconciler is off by default; an explicit interval is honoured there too', () => {
    expect(loadServeConfig(BASE, {}).redecReconcile).toBeNull();
    expect(loadServeConfig({ ...BASE, 'redec-reconcile-interval-ms': '60000' }, {}).redecReconcile).toMatchObject({ intervalMs: 60_000, graceMs: 7_200_000 });
    expect(loadServeConfig(BASE, { CONSENT_SIDECAR_REDEC_RECONCILE_INTERVAL_MS: '1000' }).redecReconcile).toMatchObject({ intervalMs: 1000 });
  });

  it('0 turns the reconciler off; flags win over variables', () => {
    expect(loadServeConfig({ ...BASE, ...APP, 'redec-reconcile-interval-ms': '0' }, {}).redecReconcile).toBeNull();
    const c = loadServeConfig({ ...BASE, ...APP, 'redec-reconcile-grace-ms': '5' }, {
      CONSENT_SIDECAR_REDEC_RECONCILE_GRACE_MS: '9',
      CONSENT_SIDECAR_REDEC_ITEMS_FIELD: 'records',
      CONSENT_SIDECAR_REDEC_CURSOR_PARAM: 'after',
    });
    expect(c.redecReconcile).toMatchObject({ graceMs: 5, fields: { itemsField: 'records', cursorParam: 'after' } });
  });

  it.each([
    [{ 'redec-reconcile-interval-ms': '-1' }, '--redec-reconcile-interval-ms'],
    [{ 'redec-reconcile-interval-ms': '50' }, '--redec-reconcile-interval-ms'],
    [{ 'redec-reconcile-grace-ms': 'soon' }, '--redec-reconcile-grace-ms'],
    [{ 'redec-reconcile-repeat-ms': '0' }, '--redec-reconcile-repeat-ms'],
    [{ 'redec-reconcile-page-limit': '0' }, '--redec-reconcile-page-limit'],
    [{ 'redec-items-field': 'a b' }, '--redec-items-field'],
    [{ 'redec-cursor-param': '' }, '--redec-cursor-param'],
    [{ 'redec-cursor-param': 'x&y=1' }, '--redec-cursor-param'],
  ])('%j is refused naming %s', (flags, flag) => {
    const p = problems(flags);
    expect(p).toHaveLength(1);
    expect(p[0]).toMatch(new RegExp(`^${flag}\\b`));
  });

  it('redec pending resolves the same field rules', () => {
    expect(resolveRedecListingFields({}, {})).toEqual({ itemsField: null, cursorParam: 'cursor' });
    expect(() => resolveRedecListingFields({ 'redec-items-field': '{}' }, {})).toThrow(ConfigError);
  });
});
