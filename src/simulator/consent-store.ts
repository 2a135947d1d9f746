import { randomUUID } from 'node:crypto';
import { SimulatorError } from './errors.js';
import type {
  ConsentStatus,
  Fixture,
  FixtureConsent,
  FixtureCustomer,
  FixtureFlowVersion,
} from './fixture-types.js';
import { validateFlowVersion } from './fixture-validate.js';

/** A customer's current state for one consent. */
export interface ConsentRecord {
  readonly status: Exclude<ConsentStatus, 'none'>;
  /** Epoch ms; absent means no expiry. */
  readonly expiresAt?: number;
  /** Covered scope ids; absent means every scope of the consent. */
  readonly scopes?: ReadonlySet<string>;
  readonly redecConsentId?: string;
  readonly grantedAt?: number;
}

/** Which consent of which customer a control operation targets: by `consentId`, or by `configKey` (its single consent). */
export interface ConsentTarget {
  readonly userReference: string;
  readonly consentId?: string;
  readonly configKey?: string;
}

/** A recorded consent action, the source of `consent_action.created` and REDEC events. */
export interface ConsentChange {
  readonly action: 'grant' | 'revoke' | 'deny';
  readonly consentActionId: string;
  readonly customer: FixtureCustomer;
  readonly consent: FixtureConsent;
  readonly configKey?: string;
  /** Epoch ms. */
  readonly occurredAt: number;
  readonly expiresAt?: number;
  readonly redecConsentId?: string;
}

/** Options of a grant. */
export interface GrantOptions {
  /** Epoch ms; wins over `ttlMs`. */
  readonly expiresAt?: number;
  /** Expiry relative to now (ms). Neither: no expiry. */
  readonly ttlMs?: number;
  /** Covered scope ids; default every scope. */
  readonly scopes?: readonly string[];
}

const key = (customerId: string, consentId: string): string => `${customerId}\u0000${consentId}`;

/** The simulator's canonical, mutable consent state, built from a validated fixture. */
export class ConsentStore {
  private readonly customers = new Map<string, FixtureCustomer>();
  private readonly flows = new Map<string, FixtureFlowVersion[]>();
  private readonly records = new Map<string, ConsentRecord>();

  constructor(fixture: Fixture, startedAt: number) {
    for (const c of fixture.customers) this.customers.set(c.userReference, c);
    for (const f of fixture.flows) this.flows.set(f.configKey, [...f.versions]);
    for (const s of fixture.consentStates) {
      if (s.status === 'none') continue;
      const customer = this.customers.get(s.userReference) as FixtureCustomer;
      const expiresAt = s.expiresAt ?? (s.expiresInMs !== undefined ? startedAt + s.expiresInMs : undefined);
      // A REDEC grant from the fixture needs an id too, so that revoking it raises its obligation.
      const redecConsentId =
        s.redecConsentId ?? (this.findConsent(s.consentId)?.redec ? `rdc_${customer.customerId}_${s.consentId}` : undefined);
      this.records.set(key(customer.customerId, s.consentId), {
        status: s.status,
        ...(expiresAt !== undefined ? { expiresAt } : {}),
        ...(s.scopes ? { scopes: new Set(s.scopes) } : {}),
        ...(redecConsentId ? { redecConsentId } : {}),
        ...(s.status === 'granted' ? { grantedAt: startedAt } : {}),
      });
    }
  }

  customer(userReference: string): FixtureCustomer | undefined {
    return this.customers.get(userReference);
  }

  /** The highest published version of `configKey`, or undefined. */
  latestPublished(configKey: string): FixtureFlowVersion | undefined {
    let best: FixtureFlowVersion | undefined;
    for (const v of this.flows.get(configKey) ?? []) {
      if (v.published && (!best || v.version > best.version)) best = v;
    }
    return best;
  }

  record(customerId: string, consentId: string): ConsentRecord | undefined {
    return this.records.get(key(customerId, consentId));
  }

  /** Every consent state, for the control surface's state view. */
  snapshot(): { userReference: string; consentId: string; record: ConsentRecord }[] {
    const byId = new Map([...this.customers.values()].map((c) => [c.customerId, c.userReference]));
    return [...this.records.entries()].map(([k, record]) => {
      const [customerId, consentId] = k.split('\u0000') as [string, string];
      return { userReference: byId.get(customerId) ?? customerId, consentId, record };
    });
  }

  configKeys(): string[] {
    return [...this.flows.keys()];
  }

  grant(target: ConsentTarget, options: GrantOptions, now: number): ConsentChange {
    const { customer, consent, configKey } = this.resolve(target);
    const known = new Set(consent.scopes.map((s) => s.scopeId));
    const bad = options.scopes?.find((s) => !known.has(s));
    if (bad !== undefined) {
      throw new SimulatorError('ERR_SIMULATOR_INVALID_INPUT', `consent "${consent.consentId}" has no scope "${bad}"`);
    }
    const expiresAt = options.expiresAt ?? (options.ttlMs !== undefined ? now + options.ttlMs : undefined);
    const redecConsentId = consent.redec ? `rdc_${randomUUID()}` : undefined;
    this.records.set(key(customer.customerId, consent.consentId), {
      status: 'granted',
      grantedAt: now,
      ...(expiresAt !== undefined ? { expiresAt } : {}),
      ...(options.scopes ? { scopes: new Set(options.scopes) } : {}),
      ...(redecConsentId ? { redecConsentId } : {}),
    });
    return {
      action: 'grant',
      consentActionId: `cact_${randomUUID()}`,
      customer,
      consent,
      occurredAt: now,
      ...(configKey ? { configKey } : {}),
      ...(expiresAt !== undefined ? { expiresAt } : {}),
      ...(redecConsentId ? { redecConsentId } : {}),
    };
  }

  revoke(target: ConsentTarget, now: number): ConsentChange {
    const { customer, consent, configKey, current } = this.resolveGranted(target, 'revoke');
    this.records.set(key(customer.customerId, consent.consentId), { ...current, status: 'revoked' });
    return {
      action: 'revoke',
      consentActionId: `cact_${randomUUID()}`,
      customer,
      consent,
      occurredAt: now,
      ...(configKey ? { configKey } : {}),
      ...(current.redecConsentId ? { redecConsentId: current.redecConsentId } : {}),
    };
  }

  /**
   * Records that the customer declined the consent (the document's "denial" consent action). A
   * current grant cannot be declined (revoke it instead); the state stays without consent.
   */
  deny(target: ConsentTarget, now: number): ConsentChange {
    const { customer, consent, configKey } = this.resolve(target);
    if (this.record(customer.customerId, consent.consentId)?.status === 'granted') {
      throw new SimulatorError('ERR_SIMULATOR_CONFLICT', `cannot deny: "${target.userReference}" has granted "${consent.consentId}"; revoke it`);
    }
    return {
      action: 'deny',
      consentActionId: `cact_${randomUUID()}`,
      customer,
      consent,
      occurredAt: now,
      ...(configKey ? { configKey } : {}),
    };
  }

  /** Ends a grant now; the document has no event for an expiry, and `validUntil` already bounded it. */
  expire(target: ConsentTarget, now: number): void {
    const { customer, consent, current } = this.resolveGranted(target, 'expire');
    this.records.set(key(customer.customerId, consent.consentId), { ...current, status: 'expired', expiresAt: now });
  }

  /** Adds a version to `configKey` (creating the Flow); `version` defaults to the highest + 1. */
  publish(configKey: string, input: unknown): FixtureFlowVersion {
    const versions = this.flows.get(configKey) ?? [];
    const next = Math.max(0, ...versions.map((v) => v.version)) + 1;
    const raw = typeof input === 'object' && input !== null ? (input as Record<string, unknown>) : {};
    const version = validateFlowVersion({ published: true, version: next, ...raw });
    if (versions.some((v) => v.version === version.version)) {
      throw new SimulatorError('ERR_SIMULATOR_CONFLICT', `${configKey} already has version ${version.version}`);
    }
    this.flows.set(configKey, [...versions, version]);
    return version;
  }

  private resolveGranted(target: ConsentTarget, verb: string) {
    const resolved = this.resolve(target);
    const current = this.record(resolved.customer.customerId, resolved.consent.consentId);
    if (!current || current.status !== 'granted') {
      throw new SimulatorError(
        'ERR_SIMULATOR_CONFLICT',
        `cannot ${verb}: "${target.userReference}" has no granted "${resolved.consent.consentId}"`,
      );
    }
    return { ...resolved, current };
  }

  private resolve(target: ConsentTarget): { customer: FixtureCustomer; consent: FixtureConsent; configKey?: string } {
    const customer = this.customers.get(target.userReference);
    if (!customer) throw new SimulatorError('ERR_SIMULATOR_NOT_FOUND', `no customer "${target.userReference}"`);
    if (target.consentId !== undefined) {
      const consent = this.findConsent(target.consentId);
      if (!consent) throw new SimulatorError('ERR_SIMULATOR_NOT_FOUND', `no consent "${target.consentId}"`);
      return { customer, consent, ...(target.configKey ? { configKey: target.configKey } : {}) };
    }
    if (target.configKey === undefined) {
      throw new SimulatorError('ERR_SIMULATOR_INVALID_INPUT', 'give consentId or configKey');
    }
    const version = this.latestPublished(target.configKey);
    if (!version) throw new SimulatorError('ERR_SIMULATOR_NOT_FOUND', `no published version of "${target.configKey}"`);
    if (version.consents.length !== 1) {
      throw new SimulatorError('ERR_SIMULATOR_INVALID_INPUT', `"${target.configKey}" has several consents; give consentId`);
    }
    return { customer, consent: version.consents[0] as FixtureConsent, configKey: target.configKey };
  }

  /** The definition from the newest version that mentions the consent. */
  private findConsent(consentId: string): FixtureConsent | undefined {
    let found: { consent: FixtureConsent; version: number } | undefined;
    for (const versions of this.flows.values()) {
      for (const v of versions) {
        const c = v.consents.find((x) => x.consentId === consentId);
        if (c && (!found || v.version >= found.version)) found = { consent: c, version: v.version };
      }
    }
    return found?.consent;
  }
}
