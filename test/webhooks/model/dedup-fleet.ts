import { UNTRACED_STEPS } from '../../../src/lib/trace.js';
import { createRegistry, silentLogger } from '../../../src/observability/index.js';
import {
  appUrl,
  createSharedDedupMetrics,
  createWebhookMetrics,
  MarkerMacs,
  MemoryDedupStore,
  PassthroughMode,
  SharedDedup,
  type SharedDedupMetrics,
} from '../../../src/webhooks/index.js';
import type { DeliveryResult, VerifiedEvent } from '../../../src/webhooks/delivery-mode.js';
import { SequenceTracker } from '../../../src/webhooks/sequence-tracker.js';
import { StandInApp, type Forward } from '../../helpers/stand-ins/app.js';
import { StandInClaimStore } from '../../helpers/stand-ins/claim-store.js';
import type { ModelClock } from '../../helpers/stand-ins/clock.js';
import { Wire, type Link } from '../../helpers/stand-ins/wire.js';

/** The fleet's sizing: the lease exceeds the forward timeout; the command deadline exceeds the lease's slack (so a claim can be answered too late to use). */
export const LEASE_MS = 5000;
export const FORWARD_TIMEOUT_MS = 3000;
export const DEADLINE_MS = 4000;
const RETENTION_MS = 600_000;
export const EVENT_IDS = ['evt_a', 'evt_b', 'evt_c'] as const;
const macs = new MarkerMacs(() => ['whsec_model_dedup']);
const target = Object.freeze({ url: appUrl(new URL('http://app.test/hooks')), label: 'default' });

function event(id: string): VerifiedEvent {
  const rawBody = Buffer.from(JSON.stringify({ id, sequence: 1, type: 'test.event', occurredAt: 0, data: {} }));
  return { envelope: { id, sequence: 1, type: 'test.event', occurredAt: 0, data: {} }, facts: () => ({ eventId: id, timestamp: '0', signature: 'v1=00' }), rawBody, target };
}

interface Replica {
  readonly name: string;
  readonly link: Link;
  readonly dedup: SharedDedup;
  readonly mode: PassthroughMode;
  readonly metrics: SharedDedupMetrics;
  /** Deliveries not answered yet, with the forward each made, if any. */
  readonly open: Set<{ readonly id: string; forward?: Forward }>;
}

/**
 * Replicas of passthrough delivery over {@link SharedDedup}, sharing one {@link StandInClaimStore}
 * and one {@link StandInApp}, and what the model holds them to:
 *
 * - no 200 without the app holding the event: a delivery answered `accepted` or `duplicate` only
 *   once the app accepted a forward of it (checked as each answer comes);
 * - at most one forward at a time (`strict`): a forward never starts while another of the same
 *   event is open (checked as each starts; a crashed replica's forward is no longer open);
 * - at most one accepted forward per event (`strict`, checked at the end), except where the
 *   contract allows another: the accept was not known recorded (503 after the app's 2xx), the
 *   replica crashed between the app's 2xx and its answer or while its forward was open, or the
 *   claim's lease lapsed before the accept reached the store (counted by the policy).
 */
export class DedupFleet {
  readonly wire = new Wire({ deadlineMs: DEADLINE_MS });
  readonly claims = new StandInClaimStore(this.wire);
  readonly app = new StandInApp({ timeoutMs: FORWARD_TIMEOUT_MS, onForward: (f) => this.onForward(f) });
  readonly replicas: Replica[] = [];
  readonly violations: string[] = [];
  /** Events a second accepted forward is allowed for (see the class comment). */
  private readonly excused = new Set<string>();
  private readonly retired: Replica[] = [];
  private spawned = 0;

  constructor(
    readonly clock: ModelClock,
    /** Only faults the contract promises at most one forward through. */
    readonly strict: boolean,
  ) {}

  async start(replicas: number): Promise<void> {
    for (let i = 0; i < replicas; i++) this.replicas.push(await this.spawn());
  }

  deliver(slot: number, id: string): void {
    const r = this.replicas[slot % this.replicas.length]!;
    const d: { id: string; forward?: Forward } = { id };
    r.open.add(d);
    void r.mode.deliver(event(id), UNTRACED_STEPS).then((result) => {
      if (r.link.dead) return;
      r.open.delete(d);
      this.answered(r, d, result);
    });
  }

  /** The replica in `slot` dies without settling anything, and a fresh one takes its place. */
  async crash(slot: number): Promise<void> {
    const i = slot % this.replicas.length;
    const r = this.replicas[i]!;
    r.link.crash();
    this.app.crash(r.name);
    // The app may hold what the dead replica forwarded (answered 2xx, or open when it died).
    for (const d of r.open) if (d.forward && d.forward.state !== 'refused' && d.forward.state !== 'timed_out') this.excused.add(d.id);
    this.retired.push(r);
    this.replicas[i] = await this.spawn();
  }

  /** The store answers, the app accepts, and every lease and retry has run out. */
  async drain(): Promise<void> {
    this.wire.thaw();
    this.app.mode = 'accept';
    while (this.app.answer('accepted'));
    await this.clock.advance(LEASE_MS + 3000);
  }

  /** Violations found at the end (after {@link drain}), and the sanity of a strict run. */
  async finalCheck(): Promise<string[]> {
    const found = [...this.violations];
    if (!this.strict) return found;
    for (const id of EVENT_IDS) {
      const accepted = this.app.accepted(id);
      if (accepted.length > 1 && !this.excused.has(id) && !this.claims.lapses.has(id)) {
        found.push(`${id} accepted by the app ${accepted.length} times (forwards ${accepted.map((f) => `#${f.n} from ${f.replica} at ${f.at}`).join(', ')})`);
      }
    }
    let fallbacks = 0;
    for (const r of [...this.replicas, ...this.retired]) for (const v of (await r.metrics.fallbacks.get()).values) if (v.labels.op !== 'release') fallbacks += v.value;
    if (fallbacks > 0) found.push(`${fallbacks} claim or accept decided by a replica alone although the store was never down for a lease`);
    return found;
  }

  private async spawn(): Promise<Replica> {
    const name = `r${this.spawned++}`;
    const link = this.wire.link(name);
    const registry = createRegistry({ defaultMetrics: false });
    const metrics = createSharedDedupMetrics(registry);
    const webhookMetrics = createWebhookMetrics(registry);
    const dedup = new SharedDedup({
      store: this.claims.connect(link),
      local: new MemoryDedupStore({ retentionMs: RETENTION_MS, maxEntries: 1000, now: Date.now }),
      leaseMs: LEASE_MS,
      forwardTimeoutMs: FORWARD_TIMEOUT_MS,
      retentionMs: RETENTION_MS,
      metrics,
      macs,
      logger: silentLogger(),
      now: Date.now,
    });
    await dedup.start();
    const mode = new PassthroughMode({ dedup, app: this.app.client(name), sequences: new SequenceTracker(webhookMetrics), metrics: webhookMetrics });
    return { name, link, dedup, mode, metrics, open: new Set() };
  }

  private onForward(f: Forward): void {
    const r = this.replicas.find((x) => x.name === f.replica);
    const d = r && [...r.open].find((x) => x.id === f.id && x.forward === undefined);
    if (d) d.forward = f;
    if (!this.strict) return;
    const other = this.app.forwards.find((g) => g !== f && g.id === f.id && g.state === 'open');
    if (other) this.violations.push(`${f.id}: forward #${f.n} from ${f.replica} at ${f.at} while #${other.n} from ${other.replica} (at ${other.at}) is still open`);
  }

  private answered(r: Replica, d: { id: string; forward?: Forward }, result: DeliveryResult): void {
    if ((result.kind === 'accepted' || result.kind === 'duplicate') && this.app.accepted(d.id).length === 0) {
      this.violations.push(`${d.id}: ${r.name} answered 200 (${result.kind}) at ${Date.now()} but the app holds no copy`);
    }
    // 503 after the app's 2xx: the accept is not known recorded, and the service's retry may be forwarded.
    if (result.kind === 'failed' && d.forward?.state === 'accepted') this.excused.add(d.id);
  }
}
