import { reconnectStrategy, type LinkEvents, type RedisLink } from './link-types.js';

/** What node-redis' cluster and sentinel clients have alike for a start: connect, and subscribe once connected. */
export interface TopologyClient {
  connect(): Promise<unknown>;
  subscribe(channel: string, listener: (message: string) => void): Promise<unknown>;
}

/**
 * A link over a cluster or Sentinel client, with the start they share. node-redis' cluster and
 * sentinel clients give up when no seed or sentinel answers at start (a single server's client
 * retries by itself): this connects again with the links' backoff ({@link reconnectStrategy})
 * until it is connected or destroyed, each failure told as an error of the command path. Once
 * connected it makes the subscriptions asked for before, then tells the connection it is ready;
 * later subscriptions are made at once (and again after a reconnect, by node-redis itself).
 */
export abstract class RetriedLink implements RedisLink {
  private started = false;
  private destroyed = false;
  private hasConnected = false;
  private retry: NodeJS.Timeout | undefined;
  private readonly subscriptions: [string, (message: string) => void][] = [];

  protected constructor(private readonly events: Pick<LinkEvents, 'error' | 'ready'>) {}

  abstract readonly connected: boolean;
  abstract send(args: readonly string[]): Promise<unknown>;
  /** The client to connect and subscribe through. */
  protected abstract client(): TopologyClient;
  /** Closes the client for good; never throws. */
  protected abstract closeClient(): void;

  /** Whether a connect has succeeded (the client itself says whether it still is connected). */
  protected get ready(): boolean {
    return this.hasConnected;
  }

  async subscribe(channel: string, listener: (message: string) => void): Promise<void> {
    this.subscriptions.push([channel, listener]);
    if (this.hasConnected) await this.client().subscribe(channel, listener);
  }

  connect(): void {
    if (this.started) return;
    this.started = true;
    this.attempt(0);
  }

  /** No attempt from now on, not even one already scheduled (a client connected again would be left open). */
  destroy(): void {
    this.destroyed = true;
    clearTimeout(this.retry);
    this.closeClient();
  }

  private attempt(retries: number): void {
    if (this.destroyed) return;
    this.client()
      .connect()
      .then(
        () => {
          if (this.destroyed) return;
          this.hasConnected = true;
          for (const [channel, listener] of this.subscriptions) {
            this.client()
              .subscribe(channel, listener)
              .catch((err: unknown) => this.events.error('subscriber', err));
          }
          this.events.ready();
        },
        (err: unknown) => {
          this.events.error('command', err);
          if (this.destroyed) return;
          this.retry = setTimeout(() => this.attempt(retries + 1), reconnectStrategy(retries));
          this.retry.unref();
        },
      );
  }
}
