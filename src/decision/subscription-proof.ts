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

/**
 * Whether a replica's subscription carries every revocation published, so that nudges are the
 * whole log (see `FleetInvalidation`). Redis delivers each message to every subscriber connected
 * when it is published, or disconnects the subscriber: a subscription is proven up by the echo of
 * a read that reached the head of the log (published by the read itself, so everything appended
 * after the read arrives as a nudge), and is no proof of anything from the moment a connection
 * broke or moved, a nudge shows one missing, a read fails, or an echo does not come back in time.
 */
export class SubscriptionProof {
  private live = false;
  /** performance.now() when the subscription last delivered something in order (a nudge applied, an echo). */
  private heardAt = performance.now();
  /** Connections broken or moved so far: an echo proves only the subscription it was sent on. */
  private disturbances = 0;
  /** The echo of the last read that reached the head, still to come. */
  private awaited: { readonly token: string; readonly disturbances: number; timer?: NodeJS.Timeout } | null = null;
  private lastEcho: string | null = null;
  private closed = false;

  constructor(private readonly options: SubscriptionProofOptions) {}

  get isLive(): boolean {
    return this.live;
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

  /** The replica cannot tell any more (a read failed): the subscription carried everything up to `since`. */
  lost(since: number): void {
    if (!this.live) return;
    this.live = false;
    this.options.changed(false, since);
  }

  /** A read sent with `ticket` reached the head: its echo, heard (before or after), proves the subscription. */
  readReachedHead(ticket: ProofTicket): void {
    this.forget();
    if (ticket.disturbances !== this.disturbances) return;
    const awaited: { token: string; disturbances: number; timer?: NodeJS.Timeout } = { token: ticket.token, disturbances: ticket.disturbances };
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

  private proven(awaited: { readonly disturbances: number; timer?: NodeJS.Timeout }): void {
    clearTimeout(awaited.timer);
    if (this.awaited === awaited) this.awaited = null;
    if (awaited.disturbances !== this.disturbances || this.closed) return;
    this.heardAt = performance.now();
    if (this.live) return;
    this.live = true;
    this.options.changed(true, this.heardAt);
  }
}
