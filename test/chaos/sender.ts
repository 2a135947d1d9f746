import { deliver, SECRET, signedEvent } from '../helpers/serve-process.js';
import { deliveryHeaders } from '../helpers/webhooks.js';
import type { Fleet } from './fleet.js';
import { Semaphore, sleep, type Rng } from './lib.js';

/** One event the sender made, and what became of it. */
export interface SentEvent {
  readonly id: string;
  readonly body: string;
  readonly revocation: boolean;
  readonly createdAt: number;
  attempts: number;
  /** How the attempts were answered: status code, or `error` (connection refused or reset, deadline). */
  readonly answers: Record<string, number>;
  /** When the first 200 came, and when the delivery that got it was sent. */
  ackAt?: number;
  ackSentAt?: number;
  /** The 200's `status` (`accepted`, `duplicate`, `queued`). */
  ackStatus?: string;
}

/** One attempt's answer: a status, or `error` (connection refused or reset, deadline). */
interface Answer {
  readonly sentAt: number;
  readonly status: number | 'error';
  readonly outcome?: string;
}

/** Retries: 50 ms doubling, capped at 2 s, ±20 % jitter (the service's schedule, compressed). */
const FIRST_RETRY_MS = 50;
const MAX_RETRY_MS = 2000;
/** One delivery attempt's deadline (longer than a duplicate may wait on the lease). */
const ATTEMPT_TIMEOUT_MS = 15_000;
/** Share of deliveries made to two replicas at once, as the service's retries can land. */
const DOUBLE_DELIVERY_SHARE = 0.15;
/**
 * Delivery attempts in flight at most, as a service's pool of delivery workers bounds them. Without
 * a bound, a machine too loaded to forward within the timeout turns every event into a retry every
 * 2 s, which loads it further: the run measures its own retry storm, not the fleet.
 */
const MAX_ATTEMPTS_IN_FLIGHT = 64;

/**
 * Behaves like the consent service: signs each event (node:crypto, the test helper, not src/),
 * delivers it to a random replica, sometimes to two at once, and retries whatever was not
 * answered 200 until it is, or until {@link giveUp}. An event is acknowledged when some delivery
 * got 200.
 */
export class Sender {
  readonly events = new Map<string, SentEvent>();
  private readonly pending = new Set<Promise<SentEvent>>();
  private giveUpAt = Number.POSITIVE_INFINITY;
  private readonly slots = new Semaphore(MAX_ATTEMPTS_IN_FLIGHT);
  private seq = 0;

  constructor(
    private readonly fleet: Fleet,
    private readonly rng: Rng,
  ) {}

  /** Sends one event; resolves once it is acknowledged, or given up. */
  send(id: string, type?: string, data?: Record<string, unknown>): Promise<SentEvent> {
    const { body } = signedEvent(id, ++this.seq, type, data);
    const event: SentEvent = { id, body, revocation: type === 'consent_action.created', createdAt: Date.now(), attempts: 0, answers: {} };
    this.events.set(id, event);
    const p = this.deliverUntilAcknowledged(event);
    this.pending.add(p);
    void p.finally(() => this.pending.delete(p));
    return p;
  }

  /** Sends `count` events evenly over `durationMs` (ids `evt_<mode>_<n>`); resolves once all are sent. */
  async run(count: number, durationMs: number): Promise<void> {
    const started = Date.now();
    for (let n = 0; n < count; n++) {
      const due = started + (n * durationMs) / count;
      if (due > Date.now()) await sleep(due - Date.now());
      void this.send(`evt_${this.fleet.mode}_${n}`);
    }
  }

  /** Events not acknowledged and still being retried. */
  get inFlight(): number {
    return this.pending.size;
  }

  /** Stops retrying at `at` (epoch ms); waits for the attempts under way. */
  async giveUp(at: number): Promise<void> {
    this.giveUpAt = at;
    await Promise.allSettled([...this.pending]);
  }

  private async deliverUntilAcknowledged(event: SentEvent): Promise<SentEvent> {
    for (let retry = 0; ; retry++) {
      const answers = await Promise.all(this.targets().map((i) => this.attempt(event, i)));
      const ok = answers.find((a) => a.status === 200);
      if (ok) {
        event.ackAt = Date.now();
        event.ackSentAt = ok.sentAt;
        event.ackStatus = ok.outcome;
        return event;
      }
      const delay = Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** retry) * this.rng.between(0.8, 1.2);
      if (Date.now() + delay > this.giveUpAt) return event;
      await sleep(delay);
    }
  }

  /** One replica, or two distinct ones at once. */
  private targets(): number[] {
    const first = this.rng.int(this.fleet.size);
    if (this.rng.next() >= DOUBLE_DELIVERY_SHARE) return [first];
    return [first, (first + 1 + this.rng.int(this.fleet.size - 1)) % this.fleet.size];
  }

  private attempt(event: SentEvent, replica: number): Promise<Answer> {
    return this.slots.use(() => this.attemptNow(event, replica));
  }

  private async attemptNow(event: SentEvent, replica: number): Promise<Answer> {
    event.attempts++;
    const sentAt = Date.now();
    // Signed anew for each attempt, as the service does: the timestamp is the attempt's.
    const headers = deliveryHeaders(SECRET, Math.floor(sentAt / 1000), event.body, event.id);
    let answer: Answer;
    try {
      const res = await deliver(this.fleet.replicas[replica]!, { body: event.body, headers }, AbortSignal.timeout(ATTEMPT_TIMEOUT_MS));
      answer = { sentAt, status: res.status, outcome: String(res.body.status ?? res.body.error ?? '') };
    } catch {
      answer = { sentAt, status: 'error' };
    }
    const key = answer.status === 'error' ? 'error' : `${answer.status}${answer.outcome ? ` ${answer.outcome}` : ''}`;
    event.answers[key] = (event.answers[key] ?? 0) + 1;
    return answer;
  }
}
