import { reconnectStrategy, type LinkEvents } from './link-types.js';

/** What node-redis' cluster and sentinel clients have alike for a start: connect, and subscribe once connected. */
export interface TopologyClient {
  connect(): Promise<unknown>;
  subscribe(channel: string, listener: (message: string) => void): Promise<unknown>;
}

/**
 * The start of a cluster or Sentinel link. node-redis' cluster and sentinel clients give up when no
 * seed or sentinel answers at start (a single server's client retries by itself): this connects
 * again with the links' backoff ({@link reconnectStrategy}) until it is connected or stopped, each
 * failure told as an error of the command path. Once connected it makes the subscriptions asked
 * for before, then tells the connection it is ready; later subscriptions are made at once.
 */
export class RetriedConnect {
  private started = false;
  private stopped = false;
  private connected = false;
  private retry: NodeJS.Timeout | undefined;
  private readonly subscriptions: [string, (message: string) => void][] = [];

  constructor(
    private readonly client: TopologyClient,
    private readonly events: Pick<LinkEvents, 'error' | 'ready'>,
  ) {}

  /** Whether a connect has succeeded (the client itself says whether it still is). */
  get ready(): boolean {
    return this.connected;
  }

  /** Subscribes now when connected, else once connected; either way again after a reconnect (node-redis' own). */
  async subscribe(channel: string, listener: (message: string) => void): Promise<void> {
    this.subscriptions.push([channel, listener]);
    if (this.connected) await this.client.subscribe(channel, listener);
  }

  /** Starts connecting in the background; once only; never throws. */
  connect(): void {
    if (this.started) return;
    this.started = true;
    this.attempt(0);
  }

  /** No attempt from now on, not even one already scheduled (the link is being destroyed: a client connected again would be left open). */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.retry);
  }

  private attempt(retries: number): void {
    if (this.stopped) return;
    this.client.connect().then(
      () => {
        if (this.stopped) return;
        this.connected = true;
        for (const [channel, listener] of this.subscriptions) {
          this.client.subscribe(channel, listener).catch((err: unknown) => this.events.error('subscriber', err));
        }
        this.events.ready();
      },
      (err: unknown) => {
        this.events.error('command', err);
        if (this.stopped) return;
        this.retry = setTimeout(() => this.attempt(retries + 1), reconnectStrategy(retries));
        this.retry.unref();
      },
    );
  }
}
