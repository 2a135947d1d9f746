import { SimulatorError } from './errors.js';
import type {
  ConsentStatus,
  Fixture,
  FixtureConsent,
  FixtureConsentState,
  FixtureCustomer,
  FixtureFlow,
  FixtureFlowVersion,
  FixtureRedec,
  FixtureScope,
} from './fixture-types.js';

const STATUSES: readonly ConsentStatus[] = ['granted', 'revoked', 'expired', 'none'];

/** Collects problems as `path: message` while reading an untyped value. */
class Reader {
  readonly problems: string[] = [];

  fail(path: string, message: string): undefined {
    this.problems.push(`${path}: ${message}`);
    return undefined;
  }

  object(value: unknown, path: string): Record<string, unknown> | undefined {
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
    return this.fail(path, `expected an object, got ${describe(value)}`);
  }

  array(value: unknown, path: string): readonly unknown[] | undefined {
    if (Array.isArray(value)) return value;
    return this.fail(path, `expected an array, got ${describe(value)}`);
  }

  string(value: unknown, path: string): string | undefined {
    if (typeof value === 'string' && value.length > 0) return value;
    return this.fail(path, `expected a non-empty string, got ${describe(value)}`);
  }

  boolean(value: unknown, path: string): boolean | undefined {
    if (typeof value === 'boolean') return value;
    return this.fail(path, `expected true or false, got ${describe(value)}`);
  }

  integer(value: unknown, path: string, min = 0): number | undefined {
    if (typeof value === 'number' && Number.isSafeInteger(value) && value >= min) return value;
    return this.fail(path, `expected an integer >= ${min}, got ${describe(value)}`);
  }

  unknownKeys(obj: Record<string, unknown>, path: string, allowed: readonly string[]): void {
    for (const key of Object.keys(obj)) {
      if (!allowed.includes(key)) this.fail(`${path}.${key}`, `unknown field (allowed: ${allowed.join(', ')})`);
    }
  }
}

function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value === 'object') return 'an object';
  return `${typeof value} ${String(value)}`;
}

function readScope(r: Reader, value: unknown, path: string): FixtureScope | undefined {
  const obj = r.object(value, path);
  if (!obj) return undefined;
  r.unknownKeys(obj, path, ['scopeId', 'required', 'combinations']);
  const scopeId = r.string(obj.scopeId, `${path}.scopeId`);
  const required = r.boolean(obj.required, `${path}.required`);
  const list = r.array(obj.combinations, `${path}.combinations`);
  const combinations = (list ?? []).flatMap((c, i) => {
    const cp = `${path}.combinations[${i}]`;
    const co = r.object(c, cp);
    if (!co) return [];
    r.unknownKeys(co, cp, ['requirement', 'use']);
    const requirement = r.string(co.requirement, `${cp}.requirement`);
    const use = r.string(co.use, `${cp}.use`);
    return requirement && use ? [{ requirement, use }] : [];
  });
  if (scopeId === undefined || required === undefined || !list) return undefined;
  return { scopeId, required, combinations };
}

function readRedec(r: Reader, value: unknown, path: string): FixtureRedec | undefined {
  const obj = r.object(value, path);
  if (!obj) return undefined;
  r.unknownKeys(obj, path, [
    'deliveryResponsibility',
    'internalConsentCode',
    'finalityCode',
    'objectiveCodes',
    'mediumCode',
    'initialAccessValidityMs',
  ]);
  const responsibility = obj.deliveryResponsibility;
  if (responsibility !== 'service' && responsibility !== 'tenant') {
    r.fail(`${path}.deliveryResponsibility`, `expected "service" or "tenant", got ${describe(responsibility)}`);
  }
  const internalConsentCode = r.string(obj.internalConsentCode, `${path}.internalConsentCode`);
  const finalityCode = r.string(obj.finalityCode, `${path}.finalityCode`);
  const mediumCode = r.string(obj.mediumCode, `${path}.mediumCode`);
  const codes = r.array(obj.objectiveCodes, `${path}.objectiveCodes`);
  const objectiveCodes = (codes ?? []).map((c, i) => r.string(c, `${path}.objectiveCodes[${i}]`) ?? '');
  const validity =
    obj.initialAccessValidityMs === undefined
      ? undefined
      : r.integer(obj.initialAccessValidityMs, `${path}.initialAccessValidityMs`, 1);
  if (
    (responsibility !== 'service' && responsibility !== 'tenant') ||
    !internalConsentCode ||
    !finalityCode ||
    !mediumCode ||
    !codes
  ) {
    return undefined;
  }
  return {
    deliveryResponsibility: responsibility,
    internalConsentCode,
    finalityCode,
    objectiveCodes,
    mediumCode,
    ...(validity !== undefined ? { initialAccessValidityMs: validity } : {}),
  };
}

function readConsent(r: Reader, value: unknown, path: string): FixtureConsent | undefined {
  const obj = r.object(value, path);
  if (!obj) return undefined;
  r.unknownKeys(obj, path, ['consentId', 'scopes', 'redec']);
  const consentId = r.string(obj.consentId, `${path}.consentId`);
  const list = r.array(obj.scopes, `${path}.scopes`);
  const scopes = (list ?? []).map((s, i) => readScope(r, s, `${path}.scopes[${i}]`));
  const seen = new Set<string>();
  scopes.forEach((s, i) => {
    if (!s) return;
    if (seen.has(s.scopeId)) r.fail(`${path}.scopes[${i}].scopeId`, `duplicate scopeId "${s.scopeId}"`);
    seen.add(s.scopeId);
  });
  const redec = obj.redec === undefined ? undefined : readRedec(r, obj.redec, `${path}.redec`);
  if (!consentId || !list || scopes.some((s) => !s)) return undefined;
  return { consentId, scopes: scopes as FixtureScope[], ...(redec ? { redec } : {}) };
}

/** Reads one Flow version at `path`; also used when a version is published at run time (see validateFlowVersion). */
function readFlowVersion(r: Reader, value: unknown, path: string): FixtureFlowVersion | undefined {
  const obj = r.object(value, path);
  if (!obj) return undefined;
  r.unknownKeys(obj, path, ['version', 'published', 'materialAvailable', 'consents']);
  const version = r.integer(obj.version, `${path}.version`, 1);
  const published = r.boolean(obj.published, `${path}.published`);
  const materialAvailable =
    obj.materialAvailable === undefined ? true : r.boolean(obj.materialAvailable, `${path}.materialAvailable`);
  const list = r.array(obj.consents, `${path}.consents`);
  const consents = (list ?? []).map((c, i) => readConsent(r, c, `${path}.consents[${i}]`));
  if (version === undefined || published === undefined || materialAvailable === undefined || !list) return undefined;
  if (consents.some((c) => !c)) return undefined;
  return { version, published, materialAvailable, consents: consents as FixtureConsent[] };
}

function readFlow(r: Reader, value: unknown, path: string): FixtureFlow | undefined {
  const obj = r.object(value, path);
  if (!obj) return undefined;
  r.unknownKeys(obj, path, ['configKey', 'versions']);
  const configKey = r.string(obj.configKey, `${path}.configKey`);
  const list = r.array(obj.versions, `${path}.versions`);
  const versions = (list ?? []).map((v, i) => readFlowVersion(r, v, `${path}.versions[${i}]`));
  const seen = new Set<number>();
  versions.forEach((v, i) => {
    if (!v) return;
    if (seen.has(v.version)) r.fail(`${path}.versions[${i}].version`, `duplicate version ${v.version}`);
    seen.add(v.version);
  });
  if (!configKey || !list || versions.some((v) => !v)) return undefined;
  return { configKey, versions: versions as FixtureFlowVersion[] };
}

function readCustomer(r: Reader, value: unknown, path: string): FixtureCustomer | undefined {
  const obj = r.object(value, path);
  if (!obj) return undefined;
  r.unknownKeys(obj, path, ['userReference', 'customerId']);
  const userReference = r.string(obj.userReference, `${path}.userReference`);
  const customerId = r.string(obj.customerId, `${path}.customerId`);
  return userReference && customerId ? { userReference, customerId } : undefined;
}

function readConsentState(r: Reader, value: unknown, path: string): FixtureConsentState | undefined {
  const obj = r.object(value, path);
  if (!obj) return undefined;
  r.unknownKeys(obj, path, ['userReference', 'consentId', 'status', 'expiresAt', 'expiresInMs', 'scopes', 'redecConsentId']);
  const userReference = r.string(obj.userReference, `${path}.userReference`);
  const consentId = r.string(obj.consentId, `${path}.consentId`);
  const status = obj.status as ConsentStatus;
  if (!STATUSES.includes(status)) r.fail(`${path}.status`, `expected one of ${STATUSES.join(', ')}, got ${describe(obj.status)}`);
  const expiresAt = obj.expiresAt === undefined ? undefined : r.integer(obj.expiresAt, `${path}.expiresAt`);
  const expiresInMs = obj.expiresInMs === undefined ? undefined : r.integer(obj.expiresInMs, `${path}.expiresInMs`);
  if (obj.expiresAt !== undefined && obj.expiresInMs !== undefined) {
    r.fail(`${path}.expiresInMs`, 'give expiresAt or expiresInMs, not both');
  }
  const list = obj.scopes === undefined ? undefined : r.array(obj.scopes, `${path}.scopes`);
  const scopes = list?.map((s, i) => r.string(s, `${path}.scopes[${i}]`) ?? '');
  const redecConsentId =
    obj.redecConsentId === undefined ? undefined : r.string(obj.redecConsentId, `${path}.redecConsentId`);
  if (!userReference || !consentId || !STATUSES.includes(status)) return undefined;
  return {
    userReference,
    consentId,
    status,
    ...(expiresAt !== undefined ? { expiresAt } : {}),
    ...(expiresInMs !== undefined ? { expiresInMs } : {}),
    ...(scopes ? { scopes } : {}),
    ...(redecConsentId ? { redecConsentId } : {}),
  };
}

function crossCheck(r: Reader, fixture: Fixture): void {
  const refs = new Set<string>();
  const ids = new Set<string>();
  fixture.customers.forEach((c, i) => {
    if (refs.has(c.userReference)) r.fail(`$.customers[${i}].userReference`, `duplicate "${c.userReference}"`);
    if (ids.has(c.customerId)) r.fail(`$.customers[${i}].customerId`, `duplicate "${c.customerId}"`);
    refs.add(c.userReference);
    ids.add(c.customerId);
  });
  const keys = new Set<string>();
  const consents = new Map<string, Set<string>>();
  fixture.flows.forEach((f, i) => {
    if (keys.has(f.configKey)) r.fail(`$.flows[${i}].configKey`, `duplicate "${f.configKey}"`);
    keys.add(f.configKey);
    for (const v of f.versions) {
      for (const c of v.consents) {
        const scopes = consents.get(c.consentId) ?? new Set<string>();
        for (const s of c.scopes) scopes.add(s.scopeId);
        consents.set(c.consentId, scopes);
      }
    }
  });
  const pairs = new Set<string>();
  fixture.consentStates.forEach((s, i) => {
    const path = `$.consentStates[${i}]`;
    if (!refs.has(s.userReference)) r.fail(`${path}.userReference`, `no customer "${s.userReference}" in $.customers`);
    const scopes = consents.get(s.consentId);
    if (!scopes) r.fail(`${path}.consentId`, `no consent "${s.consentId}" in any Flow version`);
    s.scopes?.forEach((id, j) => {
      if (scopes && !scopes.has(id)) r.fail(`${path}.scopes[${j}]`, `consent "${s.consentId}" has no scope "${id}"`);
    });
    const pair = `${s.userReference}\u0000${s.consentId}`;
    if (pairs.has(pair)) r.fail(path, `second state for "${s.userReference}" and "${s.consentId}"`);
    pairs.add(pair);
  });
}

/**
 * Validates an untyped fixture (parsed JSON or an object) and returns it typed. Throws
 * {@link SimulatorError} `ERR_SIMULATOR_FIXTURE_INVALID` listing every problem with its path.
 *
 * @example
 * validateFixture(JSON.parse(text)); // throws "$.flows[0].versions: expected an array, got nothing"
 */
export function validateFixture(value: unknown, label = 'fixture'): Fixture {
  const r = new Reader();
  const obj = r.object(value, '$');
  if (obj) r.unknownKeys(obj, '$', ['customers', 'flows', 'consentStates']);
  const customers = (r.array(obj?.customers, '$.customers') ?? []).map((c, i) => readCustomer(r, c, `$.customers[${i}]`));
  const flows = (r.array(obj?.flows, '$.flows') ?? []).map((f, i) => readFlow(r, f, `$.flows[${i}]`));
  const states =
    obj?.consentStates === undefined
      ? []
      : (r.array(obj.consentStates, '$.consentStates') ?? []).map((s, i) => readConsentState(r, s, `$.consentStates[${i}]`));
  if (r.problems.length === 0) {
    const fixture: Fixture = {
      customers: customers as FixtureCustomer[],
      flows: flows as FixtureFlow[],
      consentStates: states as FixtureConsentState[],
    };
    crossCheck(r, fixture);
    if (r.problems.length === 0) return fixture;
  }
  throw new SimulatorError('ERR_SIMULATOR_FIXTURE_INVALID', r.problems, `invalid ${label}`);
}

/** Validates one Flow version given at run time (control surface). */
export function validateFlowVersion(value: unknown): FixtureFlowVersion {
  const r = new Reader();
  const version = readFlowVersion(r, value, '$');
  if (version && r.problems.length === 0) return version;
  throw new SimulatorError('ERR_SIMULATOR_INVALID_INPUT', r.problems, 'invalid Flow version');
}
