import { performance } from 'node:perf_hooks';

/** How long a read's echo may take to come back on the subscription (ms) before the subscription is no longer taken as up. */
export const INVALIDATION_ECHO_WAIT_MS = 2000;

export interface SubscriptionProofOptions {
  /** Default {@link INVALIDATION_ECHO_WAIT_MS}. */
  readonly echoWaitMs?: number;
  /**
   * Runs when the proof is won or lost. Lost, `since` (performance.now()) is the moment up to which
   * the subscription is still known to have carried everything.
   */
  readonly changed: (live: boolean, since: number) => void;
}

/** What a read takes with it to prove the subscription: the echo token, and the connections broken before it was sent. */
export interface ProofTicket {
  readonly token: string;
  readonly disturbances: number;
  readonly sentAt: number;
}

/** An echo still to come: a read's, or a keep-alive's (`settled` hears how it ended). */
interface Awaited {
  readonly token: string;
  readonly disturbances: number;
  timer?: NodeJS.Timeout;
  readonly settled?: (proven: boolean) => void;
}

/**
 * Whether a replica's subscription carries every revocation published, so that nudges are the
 * whole log (see `FleetInvalidation`). Redis delivers each message to every subscriber connected
 * when it is published, or disconnects the subscriber: a subscription is proven up by the echo of
 * a read that reached the head of the log (published by the read itself, so everything appended
 * after the read arrives as a nudge), and is no proof of anything from the moment a connection
 * broke or moved, a nudge shows one missing, a read fails, or an echo does not come back in time.
 * Nothing tells a socket that died silently (no RST) apart from a quiet one but traffic: so the
 * proof is kept fresh by keep-alive echoes ({@link keepAlive}), and is no proof past the last one.
 */
export class SubscriptionProof {
  private live = false;
  /** performance.now() when the subscription last delivered something in order (a nudge applied, an echo). */
  private heardAt = performance.now();
  /** Connections broken or moved so far: an echo proves only the subscription it was sent on. */
  private disturbances = 0;
  /** The echo of the last read that reached the head, still to come. */
  private awaited: Awaited | null = null;
  private lastEcho: string | null = null;
  private closed = false;

  constructor(private readonly options: SubscriptionProofOptions) {}

  get isLive(): boolean {
    return this.live;
  }

  /**
   * performance.now() when the subscription last delivered something in order (a nudge applied, an
   * echo): the moment up to which it is known to have carried everything. A socket that died
   * silently (no RST: a NAT or conntrack entry lost) delivers nothing after it, and says nothing.
   */
  get lastHeard(): number {
    return this.heardAt;
  }

  /** For a read about to be sent. */
  ticket(token: string): ProofTicket {
    return { token, disturbances: this.disturbances, sentAt: performance.now() };
  }

  /** The subscription delivered something in order (a nudge that followed the position). */
  heard(): void {
    this.heardAt = performance.now();
  }

  /** A connection broke or moved: what was published meanwhile may be lost, and no echo sent before proves anything. */
  disturbed(): void {
    this.disturbances++;
    this.forget();
    this.lost(this.heardAt);
  }

  /** A nudge is missing: the subscription carried everything up to the last one heard in order. */
  missing(): void {
    this.lost(this.heardAt);
  }

  /**
   * The replica cannot tell any more (a read failed, a nudge is missing): the subscription carried
   * everything up to `since`. A keep-alive still to come is dropped: its echo says the subscription
   * delivers now, not that nothing was missed, so only a read's echo proves it again.
   */
  lost(since: number): void {
    if (!this.live) return;
    this.live = false;
    if (this.awaited?.settled) this.forget();
    this.options.changed(false, since);
  }

  /**
   * A keep-alive: `ticket`'s token is published on this reader's echo channel alone (one PUBLISH,
   * no read). Heard back within `waitMs`, the subscription was up when it was published; not heard,
   * or the publish failed ({@link echoFailed}), it is no proof of anything since {@link lastHeard}.
   * False (nothing sent for it) while a read's echo is still to come: that one proves as much.
   */
  keepAlive(ticket: ProofTicket, waitMs: number, settled: (proven: boolean) => void): boolean {
    if (this.awaited || !this.live || this.closed || ticket.disturbances !== this.disturbances) return false;
    const awaited: Awaited = { token: ticket.token, disturbances: ticket.disturbances, settled };
    this.awaited = awaited;
    awaited.timer = setTimeout(() => this.echoFailed(ticket.token), waitMs);
    awaited.timer.unref();
    return true;
  }

  /** A keep-alive's echo did not come in time, or its publish failed: the subscription carried everything up to the last thing it delivered. */
  echoFailed(token: string): void {
    const awaited = this.awaited;
    if (awaited?.token !== token || !awaited.settled) return;
    clearTimeout(awaited.timer);
    this.awaited = null;
    this.lost(this.heardAt);
    awaited.settled?.(false);
  }

  /** A read sent with `ticket` reached the head: its echo, heard (before or after), proves the subscription. */
  readReachedHead(ticket: ProofTicket): void {
    this.forget();
    if (ticket.disturbances !== this.disturbances) return;
    const awaited: Awaited = { token: ticket.token, disturbances: ticket.disturbances };
    if (this.lastEcho === ticket.token) return this.proven(awaited);
    this.awaited = awaited;
    awaited.timer = setTimeout(() => {
      if (this.awaited !== awaited) return;
      this.awaited = null;
      // The read itself covered everything before it was sent.
      this.lost(ticket.sentAt);
    }, this.options.echoWaitMs ?? INVALIDATION_ECHO_WAIT_MS);
    awaited.timer.unref();
  }

  echoed(token: string): void {
    this.lastEcho = token;
    if (this.awaited?.token === token) this.proven(this.awaited);
  }

  close(): void {
    this.closed = true;
    this.forget();
  }

  private forget(): void {
    clearTimeout(this.awaited?.timer);
    this.awaited = null;
  }

  private proven(awaited: Awaited): void {
    clearTimeout(awaited.timer);
    if (this.awaited === awaited) this.awaited = null;
    if (awaited.disturbances !== this.disturbances || this.closed) return;
    // A keep-alive keeps a proof, never makes one (see lost): a read's echo must.
    if (awaited.settled && !this.live) return;
    this.heardAt = performance.now();
    awaited.settled?.(true);
    if (this.live) return;
    this.live = true;
    this.options.changed(true, this.heardAt);
  }
}
