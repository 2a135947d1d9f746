import type { AppClient, ForwardResult } from '../../../src/webhooks/index.js';

/** One forward the app received: which event, from which replica, and how it ended. */
export interface Forward {
  readonly n: number;
  readonly id: string;
  readonly replica: string;
  /** Which forward of the event the sender says it is (`x-consent-sidecar-attempt`, queue mode). */
  readonly attempt: number | undefined;
  readonly at: number;
  /**
   * `accepted`: the app answered 2xx (it holds the event); `refused`: it answered 503; `timed_out`:
   * the forward timeout ended it unanswered (the app did not take it); `abandoned`: the replica
   * that sent it crashed while it was open (the app may or may not have taken it).
   */
  state: 'open' | 'accepted' | 'refused' | 'timed_out' | 'abandoned';
}

/**
 * A scripted stand-in of the application behind an {@link AppClient}: every forward is recorded,
 * and answered as the app's mode says (`accept` 2xx at once, `refuse` 503 at once, `hold`: open
 * until {@link StandInApp.answer} or the forward timeout, on the injected clock). One app serves every replica
 * (each gets its own client), so what it holds is the fleet's.
 */
export class StandInApp {
  mode: 'accept' | 'refuse' | 'hold' = 'accept';
  readonly forwards: Forward[] = [];
  private readonly pending = new Map<Forward, { resolve: (r: ForwardResult) => void; timer: NodeJS.Timeout }>();
  private readonly dead = new Set<string>();

  constructor(
    private readonly o: {
      readonly timeoutMs: number;
      /** Sees each forward as it starts, before it is answered (the model's invariants). */
      readonly onForward?: (f: Forward) => void;
    },
  ) {}

  /** The client one replica forwards through (the parts of {@link AppClient} the policy calls). */
  client(replica: string): AppClient {
    const forward = (_url: unknown, _body: Buffer | string, headers: Record<string, string>): Promise<ForwardResult> => {
      const attempt = headers['x-consent-sidecar-attempt'];
      const f: Forward = { n: this.forwards.length, id: headers['x-service-event-id'] ?? '?', replica, attempt: attempt === undefined ? undefined : Number(attempt), at: Date.now(), state: 'open' };
      this.forwards.push(f);
      this.o.onForward?.(f);
      return new Promise<ForwardResult>((resolve) => {
        if (this.mode !== 'hold') return this.end(f, this.mode === 'accept' ? 'accepted' : 'refused', resolve);
        const timer = setTimeout(() => {
          this.pending.delete(f);
          this.end(f, 'timed_out', resolve);
        }, this.o.timeoutMs);
        this.pending.set(f, { resolve, timer });
      });
    };
    return { forward, destroy: () => Promise.resolve() } as unknown as AppClient;
  }

  /** Answers the `index`th open forward (modulo how many are open, oldest first); false when none is. */
  answer(how: 'accepted' | 'refused', index = 0): boolean {
    const open = [...this.pending.keys()];
    const f = open[index % Math.max(1, open.length)];
    if (!f) return false;
    const { resolve, timer } = this.pending.get(f)!;
    clearTimeout(timer);
    this.pending.delete(f);
    this.end(f, how, resolve);
    return true;
  }

  /** The replica crashed: its open forwards are never answered, its next ones never either. */
  crash(replica: string): void {
    this.dead.add(replica);
    for (const [f, { timer }] of this.pending) {
      if (f.replica !== replica) continue;
      clearTimeout(timer);
      this.pending.delete(f);
      f.state = 'abandoned';
    }
  }

  /** Forwards of `id` the app accepted. */
  accepted(id: string): Forward[] {
    return this.forwards.filter((f) => f.id === id && f.state === 'accepted');
  }

  private end(f: Forward, state: 'accepted' | 'refused' | 'timed_out', resolve: (r: ForwardResult) => void): void {
    if (this.dead.has(f.replica)) return void (f.state = 'abandoned');
    f.state = state;
    if (state === 'accepted') return resolve({ ok: true, status: 200 });
    if (state === 'refused') return resolve({ ok: false, cause: 'status', status: 503, detail: 'app answered 503' });
    resolve({ ok: false, cause: 'timeout', detail: `no answer within ${this.o.timeoutMs} ms` });
  }
}
