import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_FIXTURE, SimulatorError, startSimulator, validateFixture } from '../../src/simulator/index.js';

const scope = { scopeId: 's', required: true, combinations: [{ requirement: 'r', use: 'u' }] };
const good = {
  customers: [{ userReference: 'u1', customerId: 'c1' }],
  flows: [{ configKey: 'k', versions: [{ version: 1, published: true, consents: [{ consentId: 'x', scopes: [scope] }] }] }],
  consentStates: [{ userReference: 'u1', consentId: 'x', status: 'granted' }],
};

function problemsOf(value: unknown): readonly string[] {
  try {
    validateFixture(value);
  } catch (err) {
    expect(err).toBeInstanceOf(SimulatorError);
    expect((err as SimulatorError).code).toBe('ERR_SIMULATOR_FIXTURE_INVALID');
    return (err as SimulatorError).problems;
  }
  throw new Error('fixture was accepted');
}

describe('fixture validation', () => {
  it('accepts the shipped default and a minimal fixture', () => {
    expect(validateFixture(DEFAULT_FIXTURE).customers.length).toBeGreaterThan(0);
    expect(validateFixture(good).flows[0]?.versions[0]?.materialAvailable).toBe(true);
  });

  it.each([
    ['not an object', [], '$: expected an object'],
    ['missing flows', { customers: [] }, '$.flows: expected an array'],
    ['unknown top-level key', { ...good, extra: 1 }, '$.extra: unknown field'],
    ['empty userReference', { ...good, customers: [{ userReference: '', customerId: 'c1' }] }, '$.customers[0].userReference'],
    [
      'scope without combinations',
      { ...good, flows: [{ configKey: 'k', versions: [{ version: 1, published: true, consents: [{ consentId: 'x', scopes: [{ scopeId: 's', required: true }] }] }] }] },
      '$.flows[0].versions[0].consents[0].scopes[0].combinations: expected an array',
    ],
    [
      'version 0',
      { ...good, flows: [{ configKey: 'k', versions: [{ version: 0, published: true, consents: [] }] }] },
      '$.flows[0].versions[0].version: expected an integer >= 1',
    ],
    [
      'duplicate version',
      {
        ...good,
        flows: [{ configKey: 'k', versions: [{ version: 1, published: true, consents: [] }, { version: 1, published: false, consents: [] }] }],
      },
      '$.flows[0].versions[1].version: duplicate version 1',
    ],
    ['bad status', { ...good, consentStates: [{ userReference: 'u1', consentId: 'x', status: 'maybe' }] }, '$.consentStates[0].status'],
    ['unknown customer in state', { ...good, consentStates: [{ userReference: 'zz', consentId: 'x', status: 'granted' }] }, '$.consentStates[0].userReference: no customer "zz"'],
    ['unknown consent in state', { ...good, consentStates: [{ userReference: 'u1', consentId: 'nope', status: 'granted' }] }, '$.consentStates[0].consentId: no consent "nope"'],
    ['unknown scope in state', { ...good, consentStates: [{ userReference: 'u1', consentId: 'x', status: 'granted', scopes: ['q'] }] }, '$.consentStates[0].scopes[0]: consent "x" has no scope "q"'],
    [
      'both expiries',
      { ...good, consentStates: [{ userReference: 'u1', consentId: 'x', status: 'granted', expiresAt: 5, expiresInMs: 5 }] },
      '$.consentStates[0].expiresInMs: give expiresAt or expiresInMs, not both',
    ],
    [
      'bad redec responsibility',
      {
        ...good,
        flows: [
          {
            configKey: 'k',
            versions: [
              {
                version: 1,
                published: true,
                consents: [
                  {
                    consentId: 'x',
                    scopes: [scope],
                    redec: { deliveryResponsibility: 'nobody', internalConsentCode: 'i', finalityCode: 'f', objectiveCodes: [], mediumCode: 'm' },
                  },
                ],
              },
            ],
          },
        ],
      },
      '$.flows[0].versions[0].consents[0].redec.deliveryResponsibility',
    ],
  ])('rejects %s naming the path', (_name, value, expected) => {
    const problems = problemsOf(value);
    expect(problems.some((p) => p.startsWith(expected))).toBe(true);
  });

  it('reports every problem at once', () => {
    const problems = problemsOf({ customers: [{}], flows: 'no' });
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^\$\.customers\[0\]\.userReference/),
        expect.stringMatching(/^\$\.customers\[0\]\.customerId/),
        expect.stringMatching(/^\$\.flows: expected an array/),
      ]),
    );
  });

  it('loads a fixture file and reports unreadable or non-JSON files with their path', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sim-fixture-'));
    const file = join(dir, 'f.json');
    await writeFile(file, JSON.stringify(good));
    const sim = await startSimulator({ fixtures: file });
    await sim.close();

    await writeFile(file, '{nope');
    await expect(startSimulator({ fixtures: file })).rejects.toMatchObject({ code: 'ERR_SIMULATOR_FIXTURE_INVALID', message: expect.stringContaining(file) });
    await expect(startSimulator({ fixtures: join(dir, 'missing.json') })).rejects.toMatchObject({
      code: 'ERR_SIMULATOR_FIXTURE_INVALID',
      message: expect.stringContaining('ENOENT'),
    });
  });

  it('rejects bad options at start', async () => {
    await expect(startSimulator({ timeScale: 0 })).rejects.toMatchObject({ code: 'ERR_SIMULATOR_OPTIONS_INVALID' });
    await expect(startSimulator({ decisionLifetimeMs: -1 })).rejects.toMatchObject({ code: 'ERR_SIMULATOR_OPTIONS_INVALID' });
    await expect(startSimulator({ apiKey: '' })).rejects.toMatchObject({ code: 'ERR_SIMULATOR_OPTIONS_INVALID' });
  });
});
