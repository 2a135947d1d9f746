import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { InvalidRequest } from '../../src/decision/request.js';
import { FAIL_CLOSED_CAUSES } from '../../src/decision/errors.js';
import type { DecisionSource } from '../../src/decision/types.js';
import type { TargetProblem } from '../../src/http/request-target.js';
import { RECONCILED_EVENT_TYPE } from '../../src/redec/hand-off.js';
import { reasonLabel, WEBHOOK_AUTH_ERROR_CODES } from '../../src/webhooks/errors.js';
import { WEBHOOK_OK_REASONS, WEBHOOK_UNAVAILABLE_REASONS } from '../../src/webhooks/answers.js';
import { Contract, documentAsWritten, lintDocument, OPENAPI_URL } from '../helpers/openapi-contract.js';
import { CLAIMS, NOT_PROVOKED } from './claims.js';

// The document itself: valid OpenAPI 3.1, its enums the code's own lists, every entry claimed by
// a contract test. Renaming a cause, a reason or a refusal code in the code fails here.

/** Every `problem` of a refused path; the compiler holds this list to the code's type, both ways. */
const PROBLEMS = [
  'fragment', 'invalid_character', 'backslash', 'path_parameter', 'invalid_escape', 'control_character', 'encoded_slash', 'encoded_delimiter',
  'encoded_unreserved', 'double_encoding', 'invalid_utf8', 'compatibility_character', 'empty_segment', 'dot_segment', 'not_v1', 'check_path_spelling',
] as const satisfies readonly TargetProblem[];
const problemsComplete: [Exclude<TargetProblem, (typeof PROBLEMS)[number]>] extends [never] ? true : false = true;

const FIELDS = ['body', 'userReference', 'configKey', 'path', 'method', 'request', 'host'] as const satisfies readonly InvalidRequest['field'][];
const fieldsComplete: [Exclude<InvalidRequest['field'], (typeof FIELDS)[number]>] extends [never] ? true : false = true;

const SOURCES = ['cache', 'upstream', 'fail-closed', 'rejected'] as const satisfies readonly DecisionSource[];
const sourcesComplete: [Exclude<DecisionSource, (typeof SOURCES)[number]>] extends [never] ? true : false = true;

const enumOf = (schema: unknown): unknown[] => {
  const s = schema as { enum?: unknown[]; const?: unknown };
  return s.enum ?? (s.const === undefined ? [] : [s.const]);
};

describe('openapi/consent-sidecar.yaml', () => {
  it('is valid OpenAPI 3.1, and the linter refuses a broken copy', async () => {
    const doc = documentAsWritten();
    expect(doc.openapi).toBe('3.1.0');
    await lintDocument(doc);
    const broken = documentAsWritten();
    (broken.paths!['/healthz']!.get!.responses as Record<string, unknown>)['2000'] = { description: 'not a status' };
    await expect(lintDocument(broken)).rejects.toThrow();
    const dangling = documentAsWritten();
    (dangling.paths!['/healthz']!.get!.responses as Record<string, unknown>)['200'] = { $ref: '#/components/responses/Nowhere' };
    await expect(lintDocument(dangling)).rejects.toThrow(/Nowhere/);
  });

  it('its enums are the code\'s own lists', async () => {
    expect([problemsComplete, fieldsComplete, sourcesComplete]).toEqual([true, true, true]);
    const c = await Contract.load();
    expect(enumOf(c.schema('FailClosedCause'))).toEqual([...FAIL_CLOSED_CAUSES]);
    const invalid = c.schema('InvalidRequest').properties!;
    expect(enumOf(invalid.field)).toEqual([...FIELDS]);
    expect(enumOf(invalid.problem)).toEqual([...PROBLEMS]);
    expect(enumOf(c.schema('WebhookAuthReason'))).toEqual(WEBHOOK_AUTH_ERROR_CODES.map(reasonLabel));
    expect([...enumOf(c.schema('WebhookUnavailableReason'))].sort()).toEqual([...WEBHOOK_UNAVAILABLE_REASONS].sort());
    expect(enumOf(c.schema('ReconciledEvent').properties!.type)).toEqual([RECONCILED_EVENT_TYPE]);
    const webhook200 = (c.doc.paths!['/webhooks']!.post!.responses!['200'] as unknown as { content: Record<string, { schema: { properties: { status: unknown } } }> }).content['application/json']!.schema;
    expect([...enumOf(webhook200.properties.status)].sort()).toEqual([...WEBHOOK_OK_REASONS].sort());
    // Every source header the document names is one the code can send.
    const headers = c.doc.components!.headers!;
    for (const name of ['DecisionSourceDecided', 'DecisionSourceFailClosed', 'DecisionSourceRejected']) {
      for (const v of enumOf((headers[name] as { schema: unknown }).schema)) expect(SOURCES).toContain(v);
    }
  });

  it('every entry (path, method, status; webhook) is claimed by one contract test, or said why not', async () => {
    const entries = (await Contract.load()).entries();
    const claimed = [...Object.values(CLAIMS).flat(), ...Object.keys(NOT_PROVOKED)].sort();
    expect(new Set(claimed).size, 'an entry claimed twice').toBe(claimed.length);
    expect(claimed).toEqual(entries);
  });

  it('ships in the package and is named by an exports subpath', () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { files: string[]; exports: Record<string, unknown> };
    expect(pkg.files).toContain('openapi');
    expect(pkg.exports['./openapi.yaml']).toBe('./openapi/consent-sidecar.yaml');
    expect(OPENAPI_URL.pathname.endsWith('/openapi/consent-sidecar.yaml')).toBe(true);
  });
});
