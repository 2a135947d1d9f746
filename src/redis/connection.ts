import { createClient, ErrorReply, type RedisClientType } from '@redis/client';
import type { Logger } from '../observability/index.js';
import { RateLimiter } from '../observability/rate-limited-log.js';
import { outcomeOf, RedisError } from './errors.js';
import type { RedisMetrics } from './metrics.js';

/** How often the connection is checked with PING (ms); `consent_sidecar_redis_up` follows it. */
export const REDIS_HEALTH_INTERVAL_MS = 1000;
/** First reconnect delay (ms); doubles per attempt up to {@link REDIS_RECONNECT_MAX_MS}. */
export const REDIS_RECONNECT_MIN_MS = 100;
export const REDIS_RECONNECT_MAX_MS = 2000;
/** At most one log line per kind of connection error per this interval (ms). */
const ERROR_LOG_INTERVAL_MS = 30_000;

export interface RedisConnectionOptions {
  /** The current URL (`--redis-url`, or `--redis-url-file` as last read); checked every health tick, so a rotated Secret is followed. */
  readonly url: () => string;
  /** Deadline of every call (ms), `--redis-command-timeout-ms`. */
  readonly commandTimeoutMs: number;
  readonly logger: Logger;
  readonly metrics: RedisMetrics;
  /** Health PING interval (ms); default {@link REDIS_HEALTH_INTERVAL_MS}. */
  readonly healthIntervalMs?: number;
}

type Client = RedisClientType;
type Listener = (message: string) => void;

/**
 * One Redis connection for the whole process, plus a second one for subscriptions when something
 * subscribes. What every user of Redis in the sidecar goes through:
 *
 * - {@link call} gives each call a deadline and turns every failure into a {@link RedisError};
 *   there is no offline queue, so while Redis is away calls fail at once instead of piling up;
 * - reconnects with backoff (100 ms doubling to 2 s), a PING every second drives
 *   `consent_sidecar_redis_up`;
 * - {@link onRestored} hooks run when Redis comes back after it was lost (or was not there at
 *   start), and when the subscriber connection is re-established: what was published meanwhile is lost.
 *
 * Nothing here ever throws out of an event handler or a timer: Redis trouble never crashes the process.
 *
 * @example
 * const conn = new RedisConnection({ url: () => 'redis://127.0.0.1:6379', commandTimeoutMs: 500, logger, metrics });
 * conn.start();
 * const pong = await conn.call('ping', (c) => c.sendCommand(['PING']));
 */
export class RedisConnection {
  private client: Client | undefined;
  private subscriber: Client | undefined;
  private currentUrl = '';
  private readonly subscriptions = new Map<string, Set<Listener>>();
  private readonly restoredHooks: (() => void)[] = [];
  private healthTimer: NodeJS.Timeout | undefined;
  private up = false;
  /** Redis was down (or never reached) since the last time it was up: a restore is due. */
  private lost = false;
  private subscriberLost = false;
  private closed = false;
  private checking = false;
  private readonly errorLog = new RateLimiter(ERROR_LOG_INTERVAL_MS);
  private markSubscribed!: () => void;
  /** Settles once the first subscriber connection has subscribed to what was registered. */
  private readonly firstSubscribed = new Promise<void>((resolve) => (this.markSubscribed = resolve));

  constructor(private readonly options: RedisConnectionOptions) {
    if (!(options.commandTimeoutMs > 0)) throw new RangeError('RedisConnection: commandTimeoutMs must be > 0');
    options.metrics.up.set(0);
  }

  /** Connects in the background and starts the health checks; never waits for Redis. */
  start(): void {
    if (this.client || this.closed) return;
    this.connect(this.options.url());
    const interval = this.options.healthIntervalMs ?? REDIS_HEALTH_INTERVAL_MS;
    this.healthTimer = setInterval(() => void this.checkHealth(), interval);
    this.healthTimer.unref();
  }

  /** True while the last health check succeeded. */
  get isUp(): boolean {
    return this.up;
  }

  /**
   * Runs `work` on the command connection with the deadline. `op` labels the duration histogram
   * (a closed set chosen by the caller, never data).
   * @throws RedisError `ERR_REDIS_UNAVAILABLE` | `ERR_REDIS_TIMEOUT` | `ERR_REDIS_REPLY` | `ERR_REDIS_CLOSED`
   */
  async call<T>(op: string, work: (client: Client) => Promise<T>): Promise<T> {
    const end = this.options.metrics.callDuration.startTimer({ op });
    try {
      if (this.closed) throw new RedisError('ERR_REDIS_CLOSED', 'the Redis connection is closed');
      const client = this.client;
      if (!client?.isReady) throw new RedisError('ERR_REDIS_UNAVAILABLE', 'Redis is not connected');
      const result = await withDeadline(work(client), this.options.commandTimeoutMs);
      end({ outcome: 'ok' });
      return result;
    } catch (err) {
      const e = this.classify(err);
      end({ outcome: outcomeOf(e.code) });
      throw e;
    }
  }

  /**
   * Listens on `channel` over the subscriber connection (opened on first use). The client
   * re-subscribes by itself after a reconnect; what was published while it was away is lost,
   * which {@link onRestored} is for. Resolves once subscribed, or at once when Redis is away.
   */
  async subscribe(channel: string, listener: Listener): Promise<void> {
    let set = this.subscriptions.get(channel);
    const first = !set;
    if (!set) this.subscriptions.set(channel, (set = new Set()));
    set.add(listener);
    if (this.closed || !this.client) return; // start() opens the subscriber for what is registered
    if (!this.subscriber) this.openSubscriber();
    else if (first && this.subscriber.isReady) {
      // Under the command deadline: a Redis that accepts and then stalls must not hold up the start
      // (the client keeps the subscription and completes it when Redis answers).
      await withDeadline(this.subscriber.subscribe(channel, (m) => this.dispatch(channel, m)), this.options.commandTimeoutMs).catch((err: unknown) =>
        this.logError('subscribe', err),
      );
    }
    // Bounded: a Redis that is away must not hold up the start.
    await Promise.race([this.firstSubscribed, sleep(this.options.commandTimeoutMs)]);
  }

  /** `hook` runs each time Redis comes back after a loss. Hooks must not throw (they are guarded anyway). */
  onRestored(hook: () => void): void {
    this.restoredHooks.push(hook);
  }

  /** Stops health checks and closes both connections; calls after this fail with `ERR_REDIS_CLOSED`. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.healthTimer);
    this.up = false;
    this.options.metrics.up.set(0);
    await Promise.allSettled([shut(this.client), shut(this.subscriber)]);
  }

  private connect(url: string): void {
    this.currentUrl = url;
    const client = this.newClient(url, 'command');
    client.on('ready', () => void this.checkHealth());
    client.on('end', () => this.setUp(false));
    this.client = client;
    client.connect().catch((err: unknown) => this.logError('connect', err));
    if (this.subscriptions.size > 0) this.openSubscriber();
  }

  private openSubscriber(): void {
    const url = this.currentUrl;
    const sub = this.newClient(url, 'subscriber');
    this.subscriber = sub;
    let everReady = false;
    sub.on('error', () => {
      if (everReady) this.subscriberLost = true;
    });
    sub.on('ready', () => {
      // Subscriptions are sent after 'ready' the first time; node-redis replays them itself on reconnects.
      if (!everReady) {
        everReady = true;
        const channels = [...this.subscriptions.keys()];
        void Promise.allSettled(channels.map((ch) => sub.subscribe(ch, (m) => this.dispatch(ch, m)).catch((err: unknown) => this.logError('subscribe', err)))).then(
          () => this.markSubscribed(),
        );
      }
      if (this.subscriberLost) {
        this.subscriberLost = false;
        this.restored('subscriber');
      }
    });
    sub.connect().catch((err: unknown) => this.logError('connect', err));
  }

  private newClient(url: string, role: 'command' | 'subscriber'): Client {
    const client: Client = createClient({
      url,
      disableOfflineQueue: true,
      socket: {
        connectTimeout: Math.max(this.options.commandTimeoutMs, 1000),
        reconnectStrategy: (retries: number) => Math.min(REDIS_RECONNECT_MIN_MS * 2 ** Math.min(retries, 10), REDIS_RECONNECT_MAX_MS),
      },
    });
    // Without an 'error' listener node-redis errors would crash the process.
    client.on('error', (err: unknown) => {
      if (role === 'command' && !client.isReady) this.setUp(false);
      this.logError(role, err);
    });
    return client;
  }

  private dispatch(channel: string, message: string): void {
    for (const listener of this.subscriptions.get(channel) ?? []) {
      try {
        listener(message);
      } catch (err) {
        this.options.logger.error({ event: 'redis_listener_failed', err }, 'a Redis message listener threw');
      }
    }
  }

  private async checkHealth(): Promise<void> {
    if (this.closed || this.checking) return;
    this.checking = true;
    try {
      const url = this.options.url();
      if (url !== this.currentUrl) {
        this.options.logger.info({ event: 'redis_url_changed' }, 'Redis URL changed; reconnecting');
        const old = [this.client, this.subscriber];
        this.subscriber = undefined;
        this.setUp(false);
        this.subscriberLost = this.subscriptions.size > 0;
        this.connect(url);
        await Promise.allSettled(old.map(shut));
        return;
      }
      await this.call('ping', (c) => c.sendCommand(['PING']));
      this.setUp(true);
    } catch {
      this.setUp(false);
    } finally {
      this.checking = false;
    }
  }

  private setUp(up: boolean): void {
    if (this.closed) return;
    this.options.metrics.up.set(up ? 1 : 0);
    if (up === this.up) {
      if (!up) this.lost = true;
      return;
    }
    this.up = up;
    if (!up) {
      this.lost = true;
      this.options.logger.warn({ event: 'redis_down' }, 'Redis is unreachable; webhook dedup falls back to this replica');
      return;
    }
    this.options.logger.info({ event: 'redis_up' }, 'Redis is reachable');
    if (this.lost) {
      this.lost = false;
      this.restored('command');
    }
  }

  private restored(connection: 'command' | 'subscriber'): void {
    this.options.logger.info({ event: 'redis_restored', connection }, 'Redis connection restored after a loss');
    for (const hook of this.restoredHooks) {
      try {
        hook();
      } catch (err) {
        this.options.logger.error({ event: 'redis_restored_hook_failed', err }, 'a Redis restore hook threw');
      }
    }
  }

  private classify(err: unknown): RedisError {
    if (err instanceof RedisError) return err;
    if (err instanceof ErrorReply) return new RedisError('ERR_REDIS_REPLY', `Redis answered an error: ${err.message}`, { cause: err });
    if (this.closed) return new RedisError('ERR_REDIS_CLOSED', 'the Redis connection is closed', { cause: err });
    return new RedisError('ERR_REDIS_UNAVAILABLE', `Redis call failed: ${(err as Error)?.message ?? String(err)}`, { cause: err });
  }

  private logError(where: string, err: unknown): void {
    if (this.closed) return;
    const code = (err as NodeJS.ErrnoException)?.code ?? (err as Error)?.name ?? 'error';
    const suppressed = this.errorLog.admit(`${where}:${code}`);
    if (suppressed === undefined) return;
    // The message may hold the host but never the password: node-redis does not echo the URL.
    this.options.logger.warn({ event: 'redis_error', where, code, suppressed }, `Redis ${where} error: ${(err as Error)?.message ?? String(err)}`);
  }
}

const sleep = (ms: number): Promise<void> =>
  new Promise((resolve) => {
    setTimeout(resolve, ms).unref();
  });

function withDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new RedisError('ERR_REDIS_TIMEOUT', `no answer from Redis within ${ms} ms`)), ms);
    work.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}

async function shut(client: Client | undefined): Promise<void> {
  if (!client) return;
  try {
    if (client.isOpen) client.destroy();
  } catch {
    // already closed
  }
}
