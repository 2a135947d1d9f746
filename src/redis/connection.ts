import { performance } from 'node:perf_hooks';
import type { Logger } from '../observability/index.js';
import { RateLimiter } from '../observability/rate-limited-log.js';
import type { RedisCommands } from './commands.js';
import { classify, outcomeOf, reasonOf, RedisError, withDeadline } from './errors.js';
import type { RedisKeyspace } from './keyspace.js';
import { createLink, type RedisLink, type RedisTargetSpec } from './link.js';
import type { RedisMetrics } from './metrics.js';
import { isClusterNode, probeWrite } from './health-probe.js';
import { ReplicaCheck } from './replica-check.js';
import { Subscriptions, type ChannelListener } from './subscriptions.js';

export { REPLICA_CHECK_INTERVAL_MS } from './replica-check.js';

/** How often the connection is checked (ms) while anything is in doubt; `consent_sidecar_redis_up` follows it. */
export const REDIS_HEALTH_INTERVAL_MS = 1000;
/** At most one log line per kind of connection error per this interval (ms). */
const ERROR_LOG_INTERVAL_MS = 30_000;
export interface RedisConnectionOptions {
  /** Where Redis is, as now configured; read every health tick, so a rotated Secret is followed. */
  readonly target: () => RedisTargetSpec;
  readonly keyspace: RedisKeyspace;
  /** Deadline of every call (ms), `--redis-command-timeout-ms`. */
  readonly commandTimeoutMs: number;
  readonly logger: Logger;
  readonly metrics: RedisMetrics;
  /** Health check interval (ms); default {@link REDIS_HEALTH_INTERVAL_MS}. */
  readonly healthIntervalMs?: number;
  /**
   * While every call since the last passed check was answered and nothing broke a connection,
   * the check is made only when none passed for this long (ms), a call made with `probe` (a read of
   * the invalidation log, which writes the probe's key) counting as one. Default: the health check
   * interval (a check every interval, whatever else passed).
   */
  readonly quietHealthIntervalMs?: number;
  /**
   * `--redis-wait-replicas`: when above 0, the replicas the master has (one server or Sentinel) are
   * read every {@link replicaCheckIntervalMs} and a difference is logged (see {@link ReplicaCheck}).
   */
  readonly waitReplicas?: number;
  /** Default {@link REPLICA_CHECK_INTERVAL_MS}. */
  readonly replicaCheckIntervalMs?: number;
}

/**
 * One link to Redis for the whole process (one server, a cluster or a sentinel-managed master; see
 * {@link RedisTargetSpec}). What every user of Redis in the sidecar goes through:
 *
 * - {@link call} gives each call a deadline and turns every failure into a {@link RedisError} that
 *   says whether the command may have run (`outcomeUnknown`): a call refused before it was sent
 *   had no effect, one that timed out or lost its connection may have. Slow is not down;
 * - there is no offline queue: while Redis is away calls fail at once instead of piling up;
 * - a health check writes under the hash tag (see `probeWrite`), and `consent_sidecar_redis_up`
 *   is 1 only while it passes; why it fails is logged once per reason. It runs each second while
 *   anything is in doubt (a call that failed, a connection that broke, a check that failed) and
 *   otherwise once per `quietHealthIntervalMs`, a call made with `probe` counting as one: so a
 *   replica whose log poll writes the probe's key checks Redis with that poll alone;
 * - {@link onRestored} hooks run when Redis answers again after it did not; {@link onDisturbed}
 *   hooks when a connection broke or moved (a subscription may have missed messages);
 * - {@link silentForMs} says how long Redis has not answered since the first call it did not
 *   answer (or the first broken connection), which tells a stall (short) from an outage (longer
 *   than a lease); {@link answeredSince} whether it answered anything after a given moment.
 *
 * Nothing here ever throws out of an event handler or a timer: Redis trouble never crashes the process.
 *
 * @example
 * const conn = new RedisConnection({ target: () => ({ kind: 'single', url: 'redis://127.0.0.1:6379' }), keyspace, commandTimeoutMs: 500, logger, metrics });
 * conn.start();
 * const pong = await conn.call('ping', (c) => c.sendCommand(['PING']));
 */
export class RedisConnection {
  private link: RedisLink | undefined;
  private currentTarget = '';
  private readonly subscriptions: Subscriptions;
  private readonly restoredHooks: (() => void)[] = [];
  private readonly disturbedHooks: (() => void)[] = [];
  private healthTimer: NodeJS.Timeout | undefined;
  private up = false;
  /** Reasons logged since Redis was last usable. */
  private readonly downReasons = new Set<string>();
  /** Redis was down (or never reached) since the last time it was up: a restore is due. */
  private lost = false;
  private closed = false;
  private checking = false;
  /**
   * performance.now() of the last answer (a reply error is an answer; one that is not an answer,
   * `READONLY`, `LOADING`, `MOVED`, `CLUSTERDOWN`…, counts as silence: see {@link RedisError.answered}).
   */
  private lastAnswerAt = performance.now();
  /**
   * performance.now() of the first sign of silence since the last answer (when the first call
   * Redis did not answer was sent, or a connection broke), or null: nothing unanswered since.
   */
  private silentSince: number | null = null;
  /** performance.now() when the last health check that passed (the connection's own, or a `probe` call) was sent. */
  private lastProbeAt = Number.NEGATIVE_INFINITY;
  /** performance.now() of the last failed call or broken connection: the next check is due at once. */
  private doubtAt = Number.NEGATIVE_INFINITY;
  /** The single-server target is a cluster node (checked once per link). */
  private clusterNodeChecked = false;
  private readonly errorLog = new RateLimiter(ERROR_LOG_INTERVAL_MS);
  private readonly commands: RedisCommands;
  /** Waiting for the link to be ready ({@link connected}). */
  private readyWaiters: (() => void)[] = [];
  private readonly replicas: ReplicaCheck;

  constructor(private readonly options: RedisConnectionOptions) {
    if (!(options.commandTimeoutMs > 0)) throw new RangeError('RedisConnection: commandTimeoutMs must be > 0');
    options.metrics.up.set(0);
    this.commands = { sendCommand: (args) => this.link!.send(args) };
    this.subscriptions = new Subscriptions(options.logger);
    this.replicas = new ReplicaCheck({
      waitReplicas: options.waitReplicas ?? 0,
      logger: options.logger,
      ...(options.replicaCheckIntervalMs !== undefined ? { intervalMs: options.replicaCheckIntervalMs } : {}),
    });
  }

  /** Connects in the background and starts the health checks; never waits for Redis. */
  start(): void {
    if (this.link || this.closed) return;
    this.connect(this.options.target());
    const interval = this.options.healthIntervalMs ?? REDIS_HEALTH_INTERVAL_MS;
    this.healthTimer = setInterval(() => this.tick(), interval);
    this.healthTimer.unref();
  }

  /**
   * Resolves true once commands can be sent, or false after `timeoutMs`: a start that reads once
   * (the invalidation log's starting point) waits this long for a reachable Redis, never longer.
   */
  connected(timeoutMs: number): Promise<boolean> {
    if (this.link?.connected) return Promise.resolve(true);
    if (this.closed) return Promise.resolve(false);
    return new Promise((resolve) => {
      const waiter = (): void => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.readyWaiters = this.readyWaiters.filter((w) => w !== waiter);
        resolve(false);
      }, timeoutMs);
      timer.unref();
      this.readyWaiters.push(waiter);
    });
  }

  /** True while the last health check passed. */
  get isUp(): boolean {
    return this.up;
  }

  private readonly heard = (): void => {
    this.lastAnswerAt = performance.now();
    this.silentSince = null;
  };

  /** No answer to a call sent at `sentAt`, or a connection broke (then `sentAt` is now). */
  private unheard(sentAt: number): void {
    this.doubtAt = performance.now();
    if (this.silentSince === null && sentAt >= this.lastAnswerAt) this.silentSince = sentAt;
  }

  /**
   * Milliseconds Redis has not answered, counted from the first call it did not answer since its
   * last answer (in time or late) or the first connection that broke since (on the monotonic
   * clock); 0 while nothing sent since its last answer went unanswered. A replica that asked
   * nothing for a while (its checks were quiet) knows nothing of the meantime, so silence counts
   * from when it asked.
   */
  silentForMs(): number {
    return this.silentSince === null ? 0 : performance.now() - this.silentSince;
  }

  /** Whether Redis answered anything (an error reply included, in time or late) at or after `since` (performance.now()). */
  answeredSince(since: number): boolean {
    return this.lastAnswerAt >= since;
  }

  /**
   * Runs `work` with the deadline. `op` labels the duration histogram (a closed set chosen by the
   * caller, never data). With `probe`, `work` writes the health probe's key the way `probeWrite`
   * does, so its success is a passed health check.
   * @throws RedisError; see {@link RedisError.outcomeUnknown}.
   */
  async call<T>(op: string, work: (commands: RedisCommands) => Promise<T>, o: { readonly probe?: boolean } = {}): Promise<T> {
    const end = this.options.metrics.callDuration.startTimer({ op });
    const sentAt = performance.now();
    try {
      if (this.closed) throw new RedisError('ERR_REDIS_CLOSED', 'the Redis connection is closed');
      if (!this.link?.connected) throw new RedisError('ERR_REDIS_UNAVAILABLE', 'Redis is not connected');
      const pending = work(this.commands);
      // An answer read after the deadline is still an answer: Redis is slow (a WAIT ahead of it on
      // the connection, a busy machine), not silent, and silence is what decides "down".
      pending.then(this.heard, (err: unknown) => classify(err, this.closed).answered && this.heard());
      const result = await withDeadline(pending, this.options.commandTimeoutMs);
      end({ outcome: 'ok' });
      if (o.probe) this.probePassed(sentAt);
      return result;
    } catch (err) {
      const e = classify(err, this.closed);
      end({ outcome: outcomeOf(e.code) });
      if (e.code !== 'ERR_REDIS_CLOSED') {
        if (e.answered) this.doubtAt = performance.now();
        else this.unheard(sentAt);
      }
      throw e;
    }
  }

  /** A health check sent at `sentAt` passed (see {@link call}'s `probe`). */
  private probePassed(sentAt: number): void {
    // A single server given may be a cluster node: only the connection's own check tells.
    if (!this.clusterNodeChecked || this.closed) return;
    this.lastProbeAt = Math.max(this.lastProbeAt, sentAt);
    this.setUp(true);
  }

  /**
   * Listens on `channel`. The subscription is kept across reconnects and failovers; what was
   * published while the subscriber was away is lost (the invalidation log catches up from its
   * stream, the queue polls). Resolves once subscribed, or after the command deadline when Redis
   * does not answer: a Redis that is away never holds up the start.
   */
  async subscribe(channel: string, listener: ChannelListener): Promise<void> {
    const first = this.subscriptions.add(channel, listener);
    if (!first || this.closed || !this.link) return;
    await this.subscribeOn(this.link, channel);
  }

  /** `hook` runs each time Redis answers again after it did not. Hooks must not throw (they are guarded anyway). */
  onRestored(hook: () => void): void {
    this.restoredHooks.push(hook);
  }

  /**
   * `hook` runs each time a connection of the link broke, or moved to another server (a failover,
   * a slot moved), and when the health check finds Redis no longer usable: what was published
   * meanwhile may not have reached this process's subscriptions.
   */
  onDisturbed(hook: () => void): void {
    this.disturbedHooks.push(hook);
  }

  /** Stops health checks and closes the link; calls after this fail with `ERR_REDIS_CLOSED`. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.healthTimer);
    this.up = false;
    this.options.metrics.up.set(0);
    this.link?.destroy();
  }

  private connect(target: RedisTargetSpec): void {
    this.currentTarget = JSON.stringify(target);
    this.clusterNodeChecked = target.kind !== 'single';
    const link = createLink(target, {
      connectTimeoutMs: Math.max(this.options.commandTimeoutMs, 1000),
      routingKey: this.options.keyspace.key('health'),
      events: {
        error: (role, err) => {
          this.logError(role, err);
          if (link !== this.link) return;
          if (role === 'command' && !link.connected) this.setUp(false, 'not connected');
          this.disturbed();
        },
        disturbed: () => {
          if (link === this.link) this.disturbed();
        },
        ready: () => {
          for (const waiter of this.readyWaiters.splice(0)) waiter();
          void this.checkHealth();
        },
      },
    });
    this.link = link;
    for (const channel of this.subscriptions.channels()) void this.subscribeOn(link, channel);
    link.connect();
  }

  private async subscribeOn(link: RedisLink, channel: string): Promise<void> {
    const subscribed = link.subscribe(channel, (m) => this.subscriptions.dispatch(channel, m)).catch((err: unknown) => this.logError('subscribe', err));
    await Promise.race([subscribed, sleep(this.options.commandTimeoutMs)]);
  }

  /** A connection broke or moved: silence may have begun, a check is due, subscribers may have missed messages. */
  private disturbed(): void {
    if (this.closed) return;
    this.unheard(performance.now());
    this.runDisturbedHooks();
  }

  private runDisturbedHooks(): void {
    for (const hook of this.disturbedHooks) {
      try {
        hook();
      } catch (err) {
        this.options.logger.error({ event: 'redis_disturbed_hook_failed', err }, 'a Redis disturbance hook threw');
      }
    }
  }

  /** Each tick: the check, unless every call was answered since one passed within the quiet interval. */
  private tick(): void {
    const interval = this.options.healthIntervalMs ?? REDIS_HEALTH_INTERVAL_MS;
    const quiet = Math.max(interval, this.options.quietHealthIntervalMs ?? interval);
    const now = performance.now();
    const calm = this.up && this.doubtAt < this.lastProbeAt && now - this.lastProbeAt < quiet - interval / 2;
    if (!calm) void this.checkHealth();
    else void this.replicas.check(this.options.target(), () => this.call('health', (c) => c.sendCommand(['INFO', 'replication'])).then(String));
  }

  private async checkHealth(): Promise<void> {
    if (this.closed || this.checking) return;
    this.checking = true;
    const sentAt = performance.now();
    try {
      const target = this.options.target();
      if (JSON.stringify(target) !== this.currentTarget) {
        this.options.logger.info({ event: 'redis_target_changed' }, 'Redis address or credentials changed; reconnecting');
        const old = this.link;
        this.setUp(false, 'reconnecting to the new address');
        this.connect(target);
        old?.destroy();
        return;
      }
      const call = <T>(op: string, work: (c: RedisCommands) => Promise<T>): Promise<T> => this.call(op, work);
      if (!this.clusterNodeChecked) {
        if (await isClusterNode(call)) {
          this.setUp(false, 'this Redis is a cluster node: give its nodes with --redis-cluster-nodes');
          return;
        }
        this.clusterNodeChecked = true;
      }
      await probeWrite(call, this.options.keyspace.key('health'));
      this.lastProbeAt = Math.max(this.lastProbeAt, sentAt);
      this.setUp(true);
      await this.replicas.check(target, async () => String(await this.call('health', (c) => c.sendCommand(['INFO', 'replication']))));
    } catch (err) {
      this.setUp(false, reasonOf(err));
    } finally {
      this.checking = false;
    }
  }

  private setUp(up: boolean, reason = ''): void {
    if (this.closed) return;
    this.options.metrics.up.set(up ? 1 : 0);
    if (!up) {
      this.lost = true;
      if (!this.downReasons.has(reason)) {
        // Once per reason while it lasts: a Redis down for an hour is one line, not 3,600.
        this.downReasons.add(reason);
        this.options.logger.warn({ event: 'redis_down', reason }, `Redis is not usable (${reason}); webhook dedup falls back to this replica once it stays away, queue mode answers 503`);
      }
      const was = this.up;
      this.up = false;
      // A Redis that stops answering may have lost this process's subscription with it (a partition
      // leaves the socket open): subscribers take nothing for granted until they have proof again.
      if (was) this.runDisturbedHooks();
      return;
    }
    this.downReasons.clear();
    if (this.up) return;
    this.up = true;
    this.options.logger.info({ event: 'redis_up' }, 'Redis is reachable');
    if (this.lost) {
      this.lost = false;
      for (const hook of this.restoredHooks) {
        try {
          hook();
        } catch (err) {
          this.options.logger.error({ event: 'redis_restored_hook_failed', err }, 'a Redis restore hook threw');
        }
      }
    }
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
