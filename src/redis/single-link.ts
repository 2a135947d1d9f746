import { createClient } from '@redis/client';
import { socketOptions, type LinkOptions, type RedisLink, type RedisTargetSpec } from './link-types.js';

/** The part of a node-redis client this link uses (its full generic type does not survive the options object). */
interface Client {
  readonly isReady: boolean;
  readonly isOpen: boolean;
  connect(): Promise<unknown>;
  destroy(): void;
  sendCommand(args: string[]): Promise<unknown>;
  subscribe(channel: string, listener: (message: string) => void): Promise<void>;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
}

/** One server: a command client, and a second client for subscriptions opened on first use. */
export class SingleLink implements RedisLink {
  private readonly client: Client;
  private subscriber: Client | undefined;
  private started = false;

  constructor(
    private readonly spec: Extract<RedisTargetSpec, { kind: 'single' }>,
    private readonly options: LinkOptions,
  ) {
    this.client = this.newClient('command');
    this.client.on('ready', () => options.events.ready());
  }

  get connected(): boolean {
    return this.client.isReady;
  }

  send(args: readonly string[]): Promise<unknown> {
    return this.client.sendCommand([...args]);
  }

  async subscribe(channel: string, listener: (message: string) => void): Promise<void> {
    if (!this.subscriber) {
      this.subscriber = this.newClient('subscriber');
      // Ready again after a reconnect: node-redis has subscribed again (it does so before 'ready').
      let connects = 0;
      this.subscriber.on('ready', () => void (connects++ > 0 && this.options.events.disturbed()));
      if (this.started) this.subscriber.connect().catch((err: unknown) => this.options.events.error('subscriber', err));
    }
    // The subscriber keeps an offline queue (the command client has none): a subscription asked
    // before the first connection is sent once connected, and node-redis replays every
    // subscription after a reconnect.
    await this.subscriber.subscribe(channel, listener);
  }

  connect(): void {
    if (this.started) return;
    this.started = true;
    this.client.connect().catch((err: unknown) => this.options.events.error('command', err));
    this.subscriber?.connect().catch((err: unknown) => this.options.events.error('subscriber', err));
  }

  destroy(): void {
    for (const c of [this.client, this.subscriber]) {
      try {
        if (c?.isOpen) c.destroy();
      } catch {
        // already closed
      }
    }
  }

  private newClient(role: 'command' | 'subscriber'): Client {
    const url = new URL(this.spec.url);
    const client = createClient({ url: this.spec.url, disableOfflineQueue: role === 'command', socket: socketOptions(url, this.spec, this.options.connectTimeoutMs) as never }) as unknown as Client;
    // Without an 'error' listener node-redis errors would crash the process.
    client.on('error', (err: unknown) => this.options.events.error(role, err));
    return client;
  }
}
