export type BreakerState = 'closed' | 'open' | 'half_open';
export const BREAKER_STATES: readonly BreakerState[] = ['closed', 'open', 'half_open'];

export interface BreakerOptions {
  /** Consecutive failures that open the breaker. */
  readonly failureThreshold: number;
  /** Time open before one half-open probe is let through (ms). */
  readonly cooldownMs: number;
  readonly now?: () => number;
  readonly onStateChange?: (state: BreakerState) => void;
}

/** The ticket of every call while closed (only a half-open probe needs one of its own). */
const ORDINARY: { readonly probe: boolean } = Object.freeze({ probe: false });

/**
 * A consecutive-failure circuit breaker, fed only with what the service did: its answers, failed
 * connections, and timeouts of requests it was sent with a fair budget, never the time a check
 * waited inside the sidecar ({@link release}: an overload, or a timeout of a check sent late).
 * While open, checks fail closed at once instead of waiting out the whole deadline against a dead
 * service. After the cooldown one probe at a time is let through (half-open); its success closes
 * the breaker, its failure opens it again.
 */
export class CircuitBreaker {
  private current: BreakerState = 'closed';
  private failures = 0;
  private openedAt = 0;
  private probeInFlight = false;
  private readonly now: () => number;

  constructor(private readonly opts: BreakerOptions) {
    if (!(opts.failureThreshold >= 1) || !(opts.cooldownMs >= 1)) {
      throw new RangeError('failureThreshold and cooldownMs must be >= 1');
    }
    this.now = opts.now ?? Date.now;
  }

  get state(): BreakerState {
    return this.current;
  }

  /**
   * Asks to send one request. Returns a ticket to settle with {@link success} or {@link failure},
   * or `null` when the request must fail closed now.
   */
  tryAcquire(): { readonly probe: boolean } | null {
    if (this.current === 'closed') return ORDINARY;
    if (this.current === 'open' && this.now() - this.openedAt >= this.opts.cooldownMs) this.transition('half_open');
    if (this.current === 'half_open' && !this.probeInFlight) {
      this.probeInFlight = true;
      return { probe: true };
    }
    return null;
  }

  success(ticket: { readonly probe: boolean }): void {
    if (ticket.probe) this.probeInFlight = false;
    this.failures = 0;
    if (this.current !== 'closed') this.transition('closed');
  }

  /** A request the service answered without saying anything about its health (e.g. a 4xx): it is alive. */
  neutral(ticket: { readonly probe: boolean }): void {
    if (ticket.probe) this.success(ticket);
  }

  /**
   * A request that never reached the service (it could not be sent in time: `overload`), or reached
   * it too late to be judged (a timeout of a check sent with less than half its deadline left):
   * nothing was learned, nothing is counted, and a probe's turn goes to the next request.
   */
  release(ticket: { readonly probe: boolean }): void {
    if (ticket.probe) this.probeInFlight = false;
  }

  failure(ticket: { readonly probe: boolean }): void {
    if (ticket.probe) this.probeInFlight = false;
    this.failures++;
    if (this.current === 'half_open' || (this.current === 'closed' && this.failures >= this.opts.failureThreshold)) {
      this.openedAt = this.now();
      this.transition('open');
    }
  }

  private transition(state: BreakerState): void {
    this.current = state;
    this.opts.onStateChange?.(state);
  }
}
