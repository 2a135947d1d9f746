import { randomUUID } from 'node:crypto';
import type { Revocation, RevocationHook } from '../lib/revocation-hook.js';
import type { Logger } from '../observability/index.js';
import type { RedisConnection } from './connection.js';
import type { RedisKeyspace } from './keyspace.js';
import type { RedisMetrics } from './metrics.js';

/** Channel (under the prefix) of the fan-out: `{"origin":…,"scope":"user","userReference":…}` or `{"origin":…,"scope":"all"}`. */
export const INVALIDATE_CHANNEL = 'invalidate';

export interface InvalidationBusOptions {
  readonly connection: RedisConnection;
  readonly keyspace: RedisKeyspace;
  /** This replica's cache. */
  readonly local: RevocationHook;
  readonly metrics: RedisMetrics;
  readonly logger: Logger;
  /** Tells our own messages apart (a random id by default). */
  readonly replicaId?: string;
}

/**
 * Fans revocations out to every replica over Redis pub/sub (contract, "Several replicas"):
 * the replica that verified the event purges its own cache at once (through the wrapped hook) and
 * {@link share}s it; the others purge on receipt, within the pub/sub latency. A replica cut off from
 * Redis may miss messages, so when Redis comes back it purges its whole cache
 * (`consent_sidecar_cache_reconnect_purges_total`). Redis carries the revocation, never an ALLOW.
 */
export class InvalidationBus implements RevocationHook {
  private readonly channel: string;
  private readonly replicaId: string;

  constructor(private readonly options: InvalidationBusOptions) {
    this.channel = options.keyspace.channel(INVALIDATE_CHANNEL);
    this.replicaId = options.replicaId ?? randomUUID();
  }

  /** Subscribes and arms the purge on reconnect; call once. */
  async start(): Promise<void> {
    this.options.connection.onRestored(() => {
      const n = this.options.local.revokeAll();
      this.options.metrics.reconnectPurges.inc();
      this.options.logger.warn({ event: 'cache_purged_on_reconnect', entries: n }, 'Redis came back: whole cache purged (revocations may have been missed)');
    });
    await this.options.connection.subscribe(this.channel, (message) => this.onMessage(message));
  }

  revokeUser(userReference: string): number {
    return this.options.local.revokeUser(userReference);
  }

  revokeAll(): number {
    return this.options.local.revokeAll();
  }

  /** @throws RedisError when it could not be published (the event must come again). */
  async share(revocation: Revocation): Promise<void> {
    const message = JSON.stringify({ origin: this.replicaId, ...revocation });
    try {
      await this.options.connection.call('invalidate_publish', (c) => c.sendCommand(['PUBLISH', this.channel, message]));
      this.options.metrics.invalidationsPublished.inc({ outcome: 'ok' });
    } catch (err) {
      this.options.metrics.invalidationsPublished.inc({ outcome: 'failed' });
      throw err;
    }
  }

  private onMessage(message: string): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(message);
    } catch {
      return;
    }
    const m = (parsed ?? {}) as { origin?: unknown; scope?: unknown; userReference?: unknown };
    if (m.origin === this.replicaId) return;
    if (m.scope === 'user' && typeof m.userReference === 'string' && m.userReference !== '') {
      this.options.local.revokeUser(m.userReference);
      this.options.metrics.invalidationsReceived.inc({ scope: 'user' });
    } else if (m.scope === 'all') {
      this.options.local.revokeAll();
      this.options.metrics.invalidationsReceived.inc({ scope: 'all' });
    }
  }
}
