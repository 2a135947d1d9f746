import type { Logger } from '../observability/index.js';

/** What a channel's message is handed to. */
export type ChannelListener = (message: string) => void;

/**
 * The channels this process listens on and who hears each, kept across reconnects and failovers
 * (the connection subscribes every channel again on each new link). A listener that throws is
 * logged, never allowed to reach the link's event handler.
 */
export class Subscriptions {
  private readonly byChannel = new Map<string, Set<ChannelListener>>();

  constructor(private readonly logger: Logger) {}

  /** Adds `listener`; true when `channel` is new (it must be subscribed on the link). */
  add(channel: string, listener: ChannelListener): boolean {
    let set = this.byChannel.get(channel);
    const first = !set;
    if (!set) this.byChannel.set(channel, (set = new Set()));
    set.add(listener);
    return first;
  }

  channels(): IterableIterator<string> {
    return this.byChannel.keys();
  }

  dispatch(channel: string, message: string): void {
    for (const listener of this.byChannel.get(channel) ?? []) {
      try {
        listener(message);
      } catch (err) {
        this.logger.error({ event: 'redis_listener_failed', err }, 'a Redis message listener threw');
      }
    }
  }
}
