import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { REDIS_RECONNECT_MAX_MS, REDIS_RECONNECT_MIN_MS, type LinkEvents } from '../../src/redis/link-types.js';
import { RetriedLink, type TopologyClient } from '../../src/redis/retried-link.js';

/**
 * The start a cluster or Sentinel link shares, over a scripted stand-in of node-redis' client: a
 * connect that fails as often as the test says (no seed answers), subscriptions it records. The
 * real links over the real clients are proven in test/redis/link-start.test.ts.
 */
class ScriptedClient implements TopologyClient {
  connects = 0;
  failuresLeft: number;
  readonly subscribed: string[] = [];

  constructor(failures: number) {
    this.failuresLeft = failures;
  }

  connect(): Promise<unknown> {
    this.connects += 1;
    if (this.failuresLeft > 0) {
      this.failuresLeft -= 1;
      return Promise.reject(new Error(`no seed answers (${this.connects})`));
    }
    return Promise.resolve();
  }

  subscribe(channel: string): Promise<unknown> {
    this.subscribed.push(channel);
    return Promise.resolve();
  }
}

/** A link over a scripted client: the shared start, and nothing of its own. */
class ScriptedLink extends RetriedLink {
  closed = 0;

  constructor(
    private readonly scripted: TopologyClient,
    events: Pick<LinkEvents, 'error' | 'ready'>,
  ) {
    super(events);
  }

  get connected(): boolean {
    return this.ready;
  }

  send(): Promise<unknown> {
    return Promise.resolve('OK');
  }

  protected client(): TopologyClient {
    return this.scripted;
  }

  protected closeClient(): void {
    this.closed += 1;
  }
}

function recordingEvents(): Pick<LinkEvents, 'error' | 'ready'> & { errors: string[]; readies: number } {
  const out = {
    errors: [] as string[],
    readies: 0,
    error: (role: 'command' | 'subscriber', err: unknown) => void out.errors.push(`${role}: ${(err as Error).message}`),
    ready: () => void (out.readies += 1),
  };
  return out;
}

describe('RetriedLink', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('connects again with the links’ backoff (100 ms, doubling, at most 2 s) until one connect succeeds, each failure told as a command error', async () => {
    const client = new ScriptedClient(6);
    const events = recordingEvents();
    const start = new ScriptedLink(client, events);
    start.connect();
    await vi.advanceTimersByTimeAsync(0);
    expect(client.connects).toBe(1);
    let waited = 0;
    for (const wait of [100, 200, 400, 800, 1600, 2000]) {
      await vi.advanceTimersByTimeAsync(wait - 1);
      expect(client.connects).toBe(1 + waited);
      await vi.advanceTimersByTimeAsync(1);
      waited += 1;
      expect(client.connects).toBe(1 + waited);
    }
    expect(REDIS_RECONNECT_MIN_MS).toBe(100);
    expect(REDIS_RECONNECT_MAX_MS).toBe(2000);
    expect(events.errors).toEqual([1, 2, 3, 4, 5, 6].map((n) => `command: no seed answers (${n})`));
    expect(start.connected).toBe(true);
    expect(events.readies).toBe(1);
    // Connected: nothing more is tried.
    await vi.advanceTimersByTimeAsync(60_000);
    expect(client.connects).toBe(7);
  });

  it('subscribes what was asked before it connected once it has, then tells it is ready; later subscriptions at once', async () => {
    const client = new ScriptedClient(1);
    const events = recordingEvents();
    const start = new ScriptedLink(client, events);
    const early = start.subscribe('invalidate', () => undefined);
    start.connect();
    await early;
    await vi.advanceTimersByTimeAsync(0);
    expect(client.subscribed).toEqual([]);
    expect(events.readies).toBe(0);
    await vi.advanceTimersByTimeAsync(REDIS_RECONNECT_MIN_MS);
    expect(client.subscribed).toEqual(['invalidate']);
    expect(events.readies).toBe(1);
    await start.subscribe('revoke', () => undefined);
    expect(client.subscribed).toEqual(['invalidate', 'revoke']);
  });

  it('destroyed, it tries no more, not even the attempt already scheduled, and closes its client; started twice, it connects once', async () => {
    const client = new ScriptedClient(Number.POSITIVE_INFINITY);
    const start = new ScriptedLink(client, recordingEvents());
    start.connect();
    start.connect();
    await vi.advanceTimersByTimeAsync(0);
    expect(client.connects).toBe(1);
    await vi.advanceTimersByTimeAsync(REDIS_RECONNECT_MIN_MS);
    expect(client.connects).toBe(2);
    // The third attempt is scheduled (200 ms after the second failed): a destroyed client must not be connected again.
    start.destroy();
    await vi.advanceTimersByTimeAsync(60_000);
    expect(client.connects).toBe(2);
    expect(start.connected).toBe(false);
    expect(start.closed).toBe(1);
  });

  it('a connect that succeeds after it was destroyed subscribes nothing and tells nobody', async () => {
    let connected!: () => void;
    const client = new ScriptedClient(0);
    client.connect = () => new Promise<void>((resolve) => (connected = resolve));
    const events = recordingEvents();
    const start = new ScriptedLink(client, events);
    void start.subscribe('invalidate', () => undefined);
    start.connect();
    start.destroy();
    connected();
    await vi.advanceTimersByTimeAsync(0);
    expect(client.subscribed).toEqual([]);
    expect(events.readies).toBe(0);
    expect(start.connected).toBe(false);
  });

  it('a subscription that fails once connected is told as a subscriber error', async () => {
    const client = new ScriptedClient(0);
    client.subscribe = () => Promise.reject(new Error('NOPERM'));
    const events = recordingEvents();
    const start = new ScriptedLink(client, events);
    void start.subscribe('invalidate', () => undefined);
    start.connect();
    await vi.advanceTimersByTimeAsync(0);
    expect(events.errors).toEqual(['subscriber: NOPERM']);
    expect(events.readies).toBe(1);
  });
});
