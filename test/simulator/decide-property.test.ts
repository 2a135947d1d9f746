import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ConsentStore } from '../../src/simulator/consent-store.js';
import { decide } from '../../src/simulator/decide.js';
import { validateFixture } from '../../src/simulator/fixture-validate.js';
import type { Fixture } from '../../src/simulator/index.js';

const NOW = Date.UTC(2026, 0, 1);
const USERS = ['u1', 'u2'];
const CONSENTS = ['c1', 'c2'];

const combination = fc.record({ requirement: fc.constantFrom('r1', 'r2'), use: fc.constantFrom('x', 'y') });
const scope = (scopeId: string) =>
  fc.record({ scopeId: fc.constant(scopeId), required: fc.boolean(), combinations: fc.array(combination, { minLength: 0, maxLength: 2 }) });
const consent = (consentId: string) =>
  fc.record({ consentId: fc.constant(consentId), scopes: fc.tuple(scope('s1'), scope('s2')).chain((s) => fc.subarray(s)) });
// Mostly well-formed single-consent Flows (so ALLOW is reachable), sometimes anything at all.
const wellFormed = fc
  .tuple(fc.constantFrom(...CONSENTS), fc.constantFrom('s1', 's2'), combination, fc.boolean())
  .map(([consentId, scopeId, combo, withOptional]) => [
    {
      consentId,
      scopes: [
        { scopeId, required: true, combinations: [combo] },
        ...(withOptional ? [{ scopeId: scopeId === 's1' ? 's2' : 's1', required: false, combinations: [combo] }] : []),
      ],
    },
  ]);
const anyConsents = fc.subarray(CONSENTS).chain((ids) => fc.tuple(...ids.map(consent)));
const version = (n: number) =>
  fc.record({
    version: fc.constant(n),
    published: fc.boolean(),
    materialAvailable: fc.constantFrom(true, true, true, false),
    consents: fc.oneof({ arbitrary: wellFormed, weight: 3 }, { arbitrary: anyConsents, weight: 1 }),
  });
const state = (userReference: string, consentId: string) =>
  fc.option(
    fc.record({
      userReference: fc.constant(userReference),
      consentId: fc.constant(consentId),
      status: fc.constantFrom('granted', 'granted', 'granted', 'revoked', 'expired', 'none'),
      expiresAt: fc.option(fc.integer({ min: NOW - 10_000, max: NOW + 200_000 }), { nil: undefined }),
      scopes: fc.option(fc.subarray(['s1', 's2']), { nil: undefined }),
    }),
    { nil: undefined },
  );

const fixtureArb = fc
  .record({
    versions: fc.tuple(version(1), version(2), version(3)).chain((v) => fc.subarray(v)),
    states: fc.tuple(...USERS.flatMap((u) => CONSENTS.map((c) => state(u, c)))),
  })
  .map(({ versions, states }) => ({
    customers: USERS.map((u) => ({ userReference: u, customerId: `cus_${u}` })),
    flows: [
      { configKey: 'k', versions },
      // a draft naming every consent and scope, so that any generated consent state is a valid fixture
      {
        configKey: 'catalog',
        versions: [
          {
            version: 1,
            published: false,
            consents: CONSENTS.map((consentId) => ({
              consentId,
              scopes: ['s1', 's2'].map((scopeId) => ({ scopeId, required: true, combinations: [{ requirement: 'r1', use: 'x' }] })),
            })),
          },
        ],
      },
    ],
    consentStates: states.filter((s) => s !== undefined).map((s) => JSON.parse(JSON.stringify(s))),
  }));

describe('decide (properties)', () => {
  it('answers exactly one documented form, and ALLOW only when every rule holds, within expiry and lifetime', () => {
    let allows = 0;
    fc.assert(
      fc.property(fixtureArb, fc.constantFrom('u1', 'u2', 'u1', 'u2', 'ghost'), fc.constantFrom('k', 'k', 'k', 'missing'), fc.integer({ min: 1, max: 100_000 }), (raw, user, key, lifetime) => {
        const fixture: Fixture = validateFixture(raw);
        const store = new ConsentStore(fixture, NOW);
        const answer = decide(store, { userReference: user, configKey: key }, NOW, lifetime) as Record<string, unknown>;
        const keys = Object.keys(answer).sort().join(',');
        expect(['configKey,decision,validUntil', 'configKey,decision', 'decision,reason']).toContain(keys);
        if (answer.decision !== 'ALLOW') return;
        allows += 1;

        // independent reading of the document's rules
        const published = fixture.flows[0]!.versions.filter((v) => v.published).sort((a, b) => b.version - a.version)[0];
        expect(user).not.toBe('ghost');
        expect(published).toBeDefined();
        expect(published!.materialAvailable).not.toBe(false);
        expect(published!.consents).toHaveLength(1);
        const required = published!.consents[0]!.scopes.filter((s) => s.required);
        expect(required).toHaveLength(1);
        expect(required[0]!.combinations).toHaveLength(1);
        const st = fixture.consentStates.find((s) => s.userReference === user && s.consentId === published!.consents[0]!.consentId);
        expect(st?.status).toBe('granted');
        if (st?.scopes) expect(st.scopes).toContain(required[0]!.scopeId);
        const validUntil = answer.validUntil as number;
        expect(validUntil).toBeGreaterThan(NOW);
        expect(validUntil).toBeLessThanOrEqual(NOW + lifetime);
        if (st?.expiresAt !== undefined) expect(validUntil).toBeLessThanOrEqual(st.expiresAt);
      }),
      { numRuns: 2000 },
    );
    // the generator must reach ALLOW often enough for the property to mean something
    expect(allows).toBeGreaterThan(30);
  });
});
