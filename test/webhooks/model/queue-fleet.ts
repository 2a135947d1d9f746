import { createRegistry, silentLogger } from '../../../src/observability/index.js';
import { AppRoutes, createQueueMetrics, createWebhookMetrics, QueueWorker, type EnqueueResult, type QueuedEvent } from '../../../src/webhooks/index.js';
import { StandInApp, type Forward } from '../../helpers/stand-ins/app.js';
import type { ModelClock } from '../../helpers/stand-ins/clock.js';
import { StandInQueueStore } from '../../helpers/stand-ins/queue-store.js';
import { Wire, type Link } from '../../helpers/stand-ins/wire.js';
import { envelope, SECRET_A, sign } from '../../helpers/webhooks.js';

/** The fleet's sizing: the visibility exceeds the forward timeout; the command deadline exceeds their difference (so a read can be answered too late to use). */
export const VISIBILITY_MS = 5000;
export const FORWARD_TIMEOUT_MS = 3000;
export const DEADLINE_MS = 4000;
const POLL_MS = 250;
const HORIZON_MS = 3_600_000;
export const EVENT_IDS = ['evt_a', 'evt_b', 'evt_c'] as const;

interface Replica {
  readonly name: string;
  /** Whether its routes take {@link NEW_TYPE_EVENT}. */
  readonly routesNewType: boolean;
  readonly link: Link;
  readonly worker: QueueWorker;
}

/**
 * With routes that differ (a rollout), the event only the first replica's routes take: every
 * replica routes `test.*`, the one in slot 0 also `newtype.*`, and none has a default.
 */
export const NEW_TYPE_EVENT = EVENT_IDS[0];
const typeOf = (id: string, mixed: boolean): string => (mixed && id === NEW_TYPE_EVENT ? 'newtype.created' : 'test.event');

/** A delivery as the ingress hands it to the queue, signed now (on the model's clock). */
function signed(id: string, type: string): QueuedEvent {
  const body = envelope({ id, type });
  const timestamp = String(Math.floor(Date.now() / 1000));
  return { facts: { eventId: id, timestamp, signature: sign(SECRET_A, timestamp, body) }, body };
}

/**
 * Replicas of queue mode (a {@link QueueWorker} each: its ingress side and its workers) sharing one
 * {@link StandInQueueStore} and one {@link StandInApp}, and what the model holds them to:
 *
 * - never two copies at once: a forward never starts while another of the same event may still
 *   be running in the app (open, or sent by a replica that crashed, until its forward timeout);
 * - never again once the app has it: a forward never starts after the app accepted one of the
 *   event, however many copies a writer added, unless the store recorded that delivery only after
 *   the accepting forward's claim had ended (the store slower than a lease) or the accepting
 *   replica crashed before it was recorded;
 * - no 200 without the app or the store holding the event: once an enqueue resolved `queued` or
 *   `duplicate`, the store holds the event (waiting, pending, parked or dead) or the app accepted
 *   it, after every step;
 * - nothing stranded: once the store answers, the app accepts and the visibility has run out
 *   (after {@link drain}), every event answered 200 was accepted by the app;
 * - with `mixedRoutes`, an event reaches the app only through a replica whose routes take it,
 *   however many replicas whose routes do not read it first.
 */
export class QueueFleet {
  readonly wire = new Wire({ deadlineMs: DEADLINE_MS });
  readonly store = new StandInQueueStore(this.wire);
  readonly app = new StandInApp({ timeoutMs: FORWARD_TIMEOUT_MS, onForward: (f) => this.onForward(f) });
  readonly replicas: Replica[] = [];
  readonly violations: string[] = [];
  /** Events the service got a 200 for. */
  private readonly answered200 = new Set<string>();
  /** The end of the claim each forward started under (its replica's), if any. */
  private readonly claimEnds = new Map<Forward, number | undefined>();
  /** When each crashed replica crashed. */
  private readonly crashedAt = new Map<string, number>();
  private spawned = 0;

  constructor(
    readonly clock: ModelClock,
    private readonly o: { readonly mixedRoutes?: boolean } = {},
  ) {}

  async start(replicas: number): Promise<void> {
    for (let i = 0; i < replicas; i++) this.replicas.push(await this.spawn(i));
  }

  /** The service delivers `id` to the replica in `slot` (its ingress enqueues it). */
  deliver(slot: number, id: string): void {
    const r = this.replicas[slot % this.replicas.length]!;
    void r.worker.enqueue(signed(id, typeOf(id, this.o.mixedRoutes === true))).then(
      (result: EnqueueResult) => {
        if (r.link.dead || result === 'full') return;
        this.answered200.add(id);
        this.check();
      },
      () => undefined, // 503: the service retries
    );
  }

  /** The replica in `slot` dies (its workers stop, its calls go unanswered), and a fresh one takes its place. */
  async crash(slot: number): Promise<void> {
    const i = slot % this.replicas.length;
    const r = this.replicas[i]!;
    r.link.crash();
    this.crashedAt.set(r.name, Date.now());
    this.app.crash(r.name);
    void r.worker.stop(0);
    this.replicas[i] = await this.spawn(i);
  }

  /** After every step: nothing answered 200 is held by neither the app nor the store. */
  check(): void {
    for (const id of this.answered200) {
      if (this.app.accepted(id).length === 0 && !this.store.holds(id)) this.violations.push(`${id}: answered 200 at some point, but neither the app nor the store holds it at ${Date.now()}`);
    }
  }

  /** The store answers, the app accepts, and every visibility and backoff has run out. */
  async drain(): Promise<void> {
    this.wire.thaw();
    this.app.mode = 'accept';
    while (this.app.answer('accepted'));
    // Backoffs double from 1 s; a few minutes cover the retries a run can leave.
    for (let i = 0; i < 120 && [...this.answered200].some((id) => this.app.accepted(id).length === 0); i++) await this.clock.advance(VISIBILITY_MS);
  }

  /** Violations found at the end (after {@link drain}). */
  finalCheck(): string[] {
    this.check();
    const found = [...this.violations];
    for (const id of this.answered200) {
      if (this.app.accepted(id).length === 0 && !this.store.dead.some((d) => d.eventId === id)) found.push(`${id}: answered 200 but never delivered (stranded)`);
    }
    return found;
  }

  stop(): Promise<void> {
    return Promise.all(this.replicas.map((r) => r.worker.stop(0))).then(() => undefined);
  }

  private async spawn(slot: number): Promise<Replica> {
    const name = `r${this.spawned++}`;
    const routesNewType = !this.o.mixedRoutes || slot === 0;
    const url = new URL('http://app.test/hooks');
    const link = this.wire.link(name);
    const registry = createRegistry({ defaultMetrics: false });
    const worker = new QueueWorker({
      store: this.store.connect(link),
      logger: silentLogger(),
      metrics: createQueueMetrics(registry),
      secrets: () => [SECRET_A],
      app: this.app.client(name),
      routes: this.o.mixedRoutes ? new AppRoutes([{ glob: 'test.*', url }, ...(routesNewType ? [{ glob: 'newtype.*', url }] : [])], null) : new AppRoutes([], url),
      routeForwards: createWebhookMetrics(registry).routeForwards,
      forwardTimeoutMs: FORWARD_TIMEOUT_MS,
      visibilityMs: VISIBILITY_MS,
      horizonMs: HORIZON_MS,
      toleranceS: 300,
      maxBodyBytes: 65_536,
      deliveredRetentionMs: HORIZON_MS,
      now: Date.now,
      pollIntervalMs: POLL_MS,
    });
    this.routers.set(name, routesNewType);
    await worker.start();
    return { name, routesNewType, link, worker };
  }

  /** Every replica there was, by name (crashed ones included: their forwards stay on record). */
  private readonly routers = new Map<string, boolean>();

  private onForward(f: Forward): void {
    if (f.id === NEW_TYPE_EVENT && this.o.mixedRoutes && this.routers.get(f.replica) !== true) this.violations.push(`${f.id}: forward #${f.n} from ${f.replica}, whose routes do not take its type`);
    const claim = this.store.claimOf(f.id);
    this.claimEnds.set(f, claim?.link === f.replica ? claim.until : undefined);
    for (const g of this.app.accepted(f.id)) {
      if (!this.excused(g)) this.violations.push(`${f.id}: forward #${f.n} from ${f.replica} at ${f.at} after the app accepted #${g.n} from ${g.replica} (at ${g.at})`);
    }
    const running = this.app.forwards.find(
      (g) => g !== f && g.id === f.id && (g.state === 'open' || (g.state === 'abandoned' && Date.now() < g.at + FORWARD_TIMEOUT_MS)),
    );
    if (running) this.violations.push(`${f.id}: forward #${f.n} from ${f.replica} at ${f.at} while #${running.n} from ${running.replica} (at ${running.at}, ${running.state}) may still be running`);
  }

  /** Whether another forward after the accepted `g` is one the contract allows (see the class comment). */
  private excused(g: Forward): boolean {
    const recorded = this.store.recordedAt(g.id);
    const crashed = this.crashedAt.get(g.replica);
    if (crashed !== undefined && (recorded === undefined || recorded > crashed)) return true;
    const claimEnd = this.claimEnds.get(g);
    if (claimEnd === undefined) return false;
    return recorded === undefined ? Date.now() >= claimEnd : recorded >= claimEnd;
  }
}
