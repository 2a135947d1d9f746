import type { StoreFailure } from '../../../src/lib/store-failure.js';

/**
 * The fault script of the scripted stand-ins (claim store, queue store, invalidation log): what
 * happens between a replica and the shared store, on an injected clock (the test's fake timers:
 * `setTimeout` and `Date.now` are the model's), so every run is deterministic.
 *
 * Each replica talks to the store through its own {@link Link} (its connection). A call is an
 * effect on the store's state and a reply to the caller, and the script decides both, as a Redis
 * connection would (see src/redis/errors.ts):
 *
 * - by default the effect happens at once and the reply comes on the next microtask;
 * - `late`: the effect happens at once (Redis ran the script), the reply arrives `delayMs` later,
 *   unless the call's deadline ({@link WireOptions.deadlineMs}, the command timeout) comes first:
 *   then the caller gets an unknown outcome at the deadline and the reply never arrives;
 * - `unknown`: the connection broke after the call was written: the effect happened or not
 *   (`applied`), the caller gets an unknown outcome at once;
 * - `lost`: the effect happens, the reply never arrives: the caller gets an unknown outcome at its deadline;
 * - `refused`: an error reply (a refusal): known not applied, and the store answers;
 * - `unsent`: refused by the client before anything was written: known not applied.
 *
 * Store-wide: {@link Wire.freeze} holds every call (SIGSTOP: none runs, each caller gets an unknown
 * outcome at its deadline) until {@link Wire.thaw} runs them, in the order they came or in another
 * order that keeps each link's own order (calls on different connections may reach the store in
 * any order: that is how calls are reordered); {@link Wire.down} refuses every call unsent until
 * {@link Wire.up}. While frozen or down the store answers nobody: {@link Link.silentForMs} grows;
 * while it is up it answers (a health check would), so it is 0. Hooks given to `onRestored` run
 * when it answers again. A {@link Link.crash}ed replica's calls are never answered (already sent
 * ones still run), and it hears no more messages.
 */
export type Fate =
  | { readonly kind: 'late'; readonly delayMs: number }
  | { readonly kind: 'unknown'; readonly applied: boolean }
  | { readonly kind: 'lost' }
  | { readonly kind: 'refused' }
  | { readonly kind: 'unsent' };

export type StandInFailureCode = 'ERR_STAND_IN_NO_ANSWER' | 'ERR_STAND_IN_REFUSED' | 'ERR_STAND_IN_UNSENT';

/** A failed call, saying what src/lib/store-failure.ts asks: may it have taken effect, did the store answer. */
export class StandInFailure extends Error implements StoreFailure {
  readonly outcomeUnknown: boolean;
  readonly refused: boolean;

  constructor(
    readonly code: StandInFailureCode,
    op: string,
  ) {
    super(`${op}: ${code}`);
    this.outcomeUnknown = code === 'ERR_STAND_IN_NO_ANSWER';
    this.refused = code === 'ERR_STAND_IN_REFUSED';
  }
}

export interface WireOptions {
  /** A call not answered this long after it was made fails with an unknown outcome (ms). */
  readonly deadlineMs: number;
}

/** One call as the store sees it: its effect, run once, and the reply's way back. */
interface Held {
  readonly link: Link;
  run(): void;
}

/** What a model can see of a call that happened (for its counterexamples). */
export interface CallRecord {
  readonly link: string;
  readonly op: string;
  readonly fate: Fate['kind'] | 'ok' | 'held' | 'down' | 'dead';
}

export class Wire {
  private mode: 'up' | 'frozen' | 'down' = 'up';
  private since = 0;
  private held: Held[] = [];
  private readonly links = new Set<Link>();
  /** Every call made, in order, with what the script did to it. */
  readonly calls: CallRecord[] = [];

  constructor(readonly options: WireOptions) {}

  /** A new connection to the store, named for the model's messages. */
  link(name: string): Link {
    const l = new Link(this, name);
    this.links.add(l);
    return l;
  }

  get state(): 'up' | 'frozen' | 'down' {
    return this.mode;
  }

  /** Since when (epoch ms) the store has answered nobody, or null while it answers. */
  get silentSince(): number | null {
    return this.mode === 'up' ? null : this.since;
  }

  freeze(): void {
    if (this.mode !== 'up') return;
    this.mode = 'frozen';
    this.since = Date.now();
  }

  down(): void {
    if (this.mode === 'down') return;
    if (this.mode === 'up') this.since = Date.now();
    this.mode = 'down';
  }

  /**
   * Answers again: held calls run (in `order`: indexes into the links that still have held calls,
   * each taken modulo their number; arrival order when absent), then the restore hooks run.
   */
  thaw(order: readonly number[] = []): void {
    if (this.mode === 'up') return;
    this.mode = 'up';
    const pending = this.held;
    this.held = [];
    for (let i = 0; pending.length > 0; i++) {
      // The first held call of each link, in the order they came: each link keeps its own order.
      const heads = pending.filter((h, k) => pending.findIndex((x) => x.link === h.link) === k);
      const pick = heads[order.length > 0 ? order[i % order.length]! % heads.length : 0]!;
      pending.splice(pending.indexOf(pick), 1);
      pick.run();
    }
    for (const l of this.links) l.restored();
  }

  /** Same as {@link thaw}: a store that was down answers again. */
  up(): void {
    this.thaw();
  }

  /** Delivers `message` on `channel` to every live link listening (pub/sub: fire and forget). */
  publish(channel: string, message: unknown): void {
    for (const l of this.links) l.hear(channel, message);
  }

  /** @internal */
  call<T>(link: Link, op: string, effect: () => T, replied?: (value: T) => void): Promise<T> {
    const record = (fate: CallRecord['fate']): void => void this.calls.push({ link: link.name, op, fate });
    if (link.dead) {
      record('dead');
      return new Promise<T>(() => undefined);
    }
    if (this.mode === 'down') {
      record('down');
      return Promise.reject(new StandInFailure('ERR_STAND_IN_UNSENT', op));
    }
    return new Promise<T>((resolve, reject) => {
      let answered = false;
      const answer = (ok: boolean, value: unknown): void => {
        if (answered) return;
        answered = true;
        clearTimeout(deadline);
        if (link.dead) return;
        if (ok) {
          replied?.(value as T);
          resolve(value as T);
        } else reject(value);
      };
      const noAnswer = (): void => answer(false, new StandInFailure('ERR_STAND_IN_NO_ANSWER', op));
      let deadline: NodeJS.Timeout | undefined;
      const armDeadline = (): void => void (deadline = setTimeout(noAnswer, this.options.deadlineMs));
      const run = (): { ok: boolean; value: unknown } => {
        try {
          return { ok: true, value: effect() };
        } catch (err) {
          return { ok: false, value: err };
        }
      };
      if (this.mode === 'frozen') {
        record('held');
        armDeadline();
        this.held.push({ link, run: () => { const r = run(); answer(r.ok, r.value); } });
        return;
      }
      const fate = link.takeFate(op);
      record(fate?.kind ?? 'ok');
      switch (fate?.kind) {
        case undefined: {
          const r = run();
          queueMicrotask(() => answer(r.ok, r.value));
          return;
        }
        case 'late': {
          const r = run();
          armDeadline();
          setTimeout(() => answer(r.ok, r.value), fate.delayMs);
          return;
        }
        case 'unknown':
          if (fate.applied) run();
          queueMicrotask(noAnswer);
          return;
        case 'lost':
          run();
          armDeadline();
          return;
        case 'refused':
          queueMicrotask(() => answer(false, new StandInFailure('ERR_STAND_IN_REFUSED', op)));
          return;
        case 'unsent':
          queueMicrotask(() => answer(false, new StandInFailure('ERR_STAND_IN_UNSENT', op)));
          return;
      }
    });
  }
}

/** One replica's connection to the store: its fault script, its subscriptions, its restore hooks. */
export class Link {
  dead = false;
  private readonly script: { op: string; fate: Fate }[] = [];
  private readonly listeners = new Map<string, ((message: never) => void)[]>();
  private readonly hooks: (() => void)[] = [];
  private readonly disturbedHooks: (() => void)[] = [];
  /** Messages to drop, per channel (a subscription that missed a publish). */
  private readonly deaf = new Map<string, number>();
  /** Per channel: hold the next message and deliver it after the one that follows it (a reordered pair). */
  private readonly swapping = new Map<string, { held: unknown } | 'armed'>();
  /** The subscription is cut ({@link cut}): nothing reaches it until {@link rejoin}. */
  private isCut = false;

  constructor(
    private readonly wire: Wire,
    readonly name: string,
  ) {}

  /** The next call of `op` (`*`: any call) on this link meets `fate`. */
  next(fate: Fate, op = '*'): void {
    this.script.push({ op, fate });
  }

  /** The next message on `channel` to this link is lost. */
  dropNext(channel: string): void {
    this.deaf.set(channel, (this.deaf.get(channel) ?? 0) + 1);
  }

  /** The next two messages on `channel` to this link arrive in the opposite order. */
  swapNext(channel: string): void {
    this.swapping.set(channel, 'armed');
  }

  /** The subscription's connection breaks: its disturbance hooks run, and nothing reaches it until {@link rejoin}. */
  cut(): void {
    this.isCut = true;
    for (const h of this.disturbedHooks) h();
  }

  /** Subscribed again (as a client does after a reconnect): its disturbance hooks run again. */
  rejoin(): void {
    if (!this.isCut) return;
    this.isCut = false;
    for (const h of this.disturbedHooks) h();
  }

  onDisturbed(hook: () => void): void {
    this.disturbedHooks.push(hook);
  }

  /** A call through this link (see {@link Wire}); `replied` sees each reply the caller gets. */
  call<T>(op: string, effect: () => T, replied?: (value: T) => void): Promise<T> {
    return this.wire.call(this, op, effect, replied);
  }

  subscribe(channel: string, listener: (message: never) => void): Promise<void> {
    this.listeners.set(channel, [...(this.listeners.get(channel) ?? []), listener]);
    return Promise.resolve();
  }

  onRestored(hook: () => void): void {
    this.hooks.push(hook);
  }

  /** Milliseconds since the store last answered anything (0 while it answers). */
  silentForMs(): number {
    const since = this.wire.silentSince;
    return since === null ? 0 : Date.now() - since;
  }

  /** The replica stops: nothing more reaches it. */
  crash(): void {
    this.dead = true;
    this.listeners.clear();
  }

  /** @internal */
  takeFate(op: string): Fate | undefined {
    const i = this.script.findIndex((s) => s.op === '*' || s.op === op);
    return i < 0 ? undefined : this.script.splice(i, 1)[0]!.fate;
  }

  /** @internal */
  hear(channel: string, message: unknown): void {
    const listeners = this.listeners.get(channel);
    if (this.dead || this.isCut || !listeners) return;
    const drop = this.deaf.get(channel) ?? 0;
    if (drop > 0) return void this.deaf.set(channel, drop - 1);
    const swap = this.swapping.get(channel);
    if (swap === 'armed') return void this.swapping.set(channel, { held: message });
    for (const l of listeners) queueMicrotask(() => l(message as never));
    if (swap) {
      this.swapping.delete(channel);
      for (const l of listeners) queueMicrotask(() => l(swap.held as never));
    }
  }

  /** @internal */
  restored(): void {
    if (!this.dead) for (const h of this.hooks) h();
  }
}
