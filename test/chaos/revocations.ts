import type { Fleet } from './fleet.js';
import { sleep, until, type Rng } from './lib.js';
import type { Sender } from './sender.js';

/** One revocation: how long until no replica answered ALLOW for the user any more. */
export interface RevocationResult {
  readonly eventId: string;
  readonly user: string;
  /** Why it was not measured (a replica could not cache the ALLOW first, or the event was never acknowledged). */
  skipped?: string;
  /**
   * From the first 200 (the fleet acknowledged the revocation: it is shared) until the last
   * replica answered DENY (0 when all did before; a replica down at that time counts from its
   * death: it serves nothing, and comes back with an empty cache). Infinity when some replica
   * still said ALLOW at the deadline. A Redis stall delays the 200 (the revocation is answered 503
   * until it can be shared), not the propagation after it.
   */
  propagationMs?: number;
  /** When the measurement started (epoch ms): the first 200 arrived. */
  from?: number;
  /** From the moment the delivery that got the first 200 was sent (includes waiting for Redis). */
  fromSentMs?: number;
  /** Replicas that were down (killed by the nemesis) rather than answering DENY. */
  down?: number;
  /** Replicas that answered ALLOW again after they had answered DENY. */
  allowAgain?: number;
}

const USERS = ['bob', 'carol', 'dave', 'erin'];
const CONFIG_KEY = 'marketing-email';
const POLL_MS = 25;
/** How long a revocation may take before it is recorded as never propagated. */
const PROPAGATION_DEADLINE_MS = 15_000;

/**
 * Every 2–5 s (seeded): grant a user at the service, have every replica cache the ALLOW, revoke
 * it at the service (which answers DENY after), deliver the revocation event
 * (`consent_action.created` with `data.userReference`) through the sender, and poll every
 * replica's decision API until none answers ALLOW.
 */
export class RevocationProber {
  readonly results: RevocationResult[] = [];

  constructor(
    private readonly fleet: Fleet,
    private readonly sender: Sender,
    private readonly rng: Rng,
  ) {}

  async run(endAt: number): Promise<void> {
    for (let k = 0; Date.now() < endAt; k++) {
      await sleep(this.rng.between(2000, 5000));
      if (Date.now() >= endAt) return;
      this.results.push(await this.revokeOnce(k));
    }
  }

  private async revokeOnce(k: number): Promise<RevocationResult> {
    const user = USERS[k % USERS.length]!;
    const result: RevocationResult = { eventId: `rev_${this.fleet.mode}_${k}`, user };
    this.fleet.sim.grantConsent({ userReference: user, configKey: CONFIG_KEY, ttlMs: 3_600_000 });
    const cached = await until(async () => (await this.answers(user)).every((a) => a === 'cached-allow'), Date.now() + 10_000, 50);
    this.fleet.sim.revokeConsent({ userReference: user, configKey: CONFIG_KEY });
    if (!cached) return { ...result, skipped: 'some replica did not cache the ALLOW within 10 s' };

    const deniedAt: (number | undefined)[] = this.fleet.replicas.map(() => undefined);
    let down = 0;
    const acked = this.sender.send(result.eventId, 'consent_action.created', { action: 'revoke', userReference: user, configKey: CONFIG_KEY });
    let deadline = Number.POSITIVE_INFINITY;
    void acked.then(() => (deadline = Date.now() + PROPAGATION_DEADLINE_MS));
    while (deniedAt.some((t) => t === undefined) && Date.now() < deadline) {
      const answers = await this.answers(user);
      answers.forEach((a, i) => {
        if (deniedAt[i] !== undefined || (a !== 'deny' && a !== 'down')) return;
        deniedAt[i] = Date.now();
        if (a === 'down') down++;
      });
      await sleep(POLL_MS);
    }
    const event = await acked;
    if (event.ackSentAt === undefined || event.ackAt === undefined) return { ...result, skipped: 'the revocation was never acknowledged' };
    const allowAgain = (await this.answers(user)).filter((a) => a === 'cached-allow' || a === 'allow').length;
    const last = deniedAt.some((t) => t === undefined) ? Number.POSITIVE_INFINITY : Math.max(...(deniedAt as number[]));
    return { ...result, from: event.ackAt, propagationMs: Math.max(0, last - event.ackAt), fromSentMs: Math.max(0, last - event.ackSentAt), down, allowAgain };
  }

  /** What each replica answers for the user now. */
  private answers(user: string): Promise<('cached-allow' | 'allow' | 'deny' | 'down' | 'other')[]> {
    return Promise.all(
      this.fleet.replicas.map(async (r, i) => {
        if (this.fleet.down[i]) return 'down';
        try {
          const a = await r.check(user, CONFIG_KEY);
          if (a.status === 200 && a.json.decision === 'ALLOW') return a.source === 'cache' ? 'cached-allow' : 'allow';
          return a.status === 200 && a.json.decision === 'DENY' ? 'deny' : 'other';
        } catch {
          return this.fleet.down[i] ? 'down' : 'other';
        }
      }),
    );
  }
}
