import type { ClaimStore, InFlightOutcome, SharedAccept, SharedClaim } from '../webhooks/index.js';
import type { RedisConnection } from './connection.js';
import { ACCEPT, acceptedValue, CLAIM, DEDUP_VALUE_MAX_BYTES, RELEASE } from './dedup-scripts.js';
import { RedisError } from './errors.js';
import type { RedisKeyspace } from './keyspace.js';
import { replicasInSync, waitForReplicas, type ReplicaWait } from './replicas.js';

/**
 * Channel (under the tag) on which settled claims are announced, when a replica waits for them:
 * `{"id":…,"outcome":"accepted","mac":…}` or `{"id":…,"outcome":"released"}`.
 */
export const DEDUP_SETTLED_CHANNEL = 'dedup-settled';
/** Owner segment of the dedup keys: `{<prefix>}dedup:<event id>`. */
export const DEDUP_KEY_OWNER = 'dedup';
/**
 * Owner segment of the waiting keys: `{<prefix>}dedup-waiting:<event id>` exists while a replica
 * waits for the event's in-flight claim to settle (a segment of its own: an event id may hold `:`).
 */
export const DEDUP_WAITING_KEY_OWNER = 'dedup-waiting';
/**
 * A waiting key outlives the holder's lease by this much (ms): a settlement just after the lease
 * still reaches a waiter that has not given up yet (it waits the lease and a little more).
 */
export const DEDUP_WAITING_SLACK_MS = 1000;

/**
 * {@link ClaimStore} on Redis: one key per event id, moved by token-guarded scripts (see
 * dedup-scripts.ts), settlements announced on a channel only when a claim found the event in
 * flight (a replica waits): a webhook costs no message to the fleet unless two copies meet. Storage only; the policy (local first,
 * fallback, backfill, what a stall means) is `SharedDedup`'s in src/webhooks/. Replies are checked.
 * With `--redis-wait-replicas`, a claim and an accept resolve only once that many replicas hold
 * them (`ERR_REDIS_NOT_REPLICATED` otherwise): a failover then forgets neither, and a claim written
 * to a master that lost its replicas (one restarted with its old role) is never used.
 */
export class RedisClaimStore implements ClaimStore {
  private readonly channel: string;

  constructor(
    private readonly connection: RedisConnection,
    private readonly keyspace: RedisKeyspace,
    private readonly wait: ReplicaWait = {},
  ) {
    this.channel = keyspace.channel(DEDUP_SETTLED_CHANNEL);
  }

  async claim(id: string, token: string, leaseMs: number, acceptedMacs: readonly string[], longestLeaseMs: number): Promise<SharedClaim> {
    const reply = await this.connection.call('dedup_claim', async (c) => {
      // Not claimed at all when it could not be replicated (nothing to let go afterwards).
      await replicasInSync(c, this.wait);
      const args = [token, String(leaseMs), String(DEDUP_VALUE_MAX_BYTES), String(longestLeaseMs), String(DEDUP_WAITING_SLACK_MS), ...acceptedMacs.map(acceptedValue)];
      const r = await CLAIM.run(c, [this.key(id), this.waitingKey(id)], args);
      if (Array.isArray(r) && r[0] === 'claimed') await waitForReplicas(c, this.wait);
      return r;
    });
    if (Array.isArray(reply) && typeof reply[1] === 'number') {
      if (reply[0] === 'claimed') return { kind: 'claimed', displaced: reply[1] === 1 };
      if (reply[0] === 'duplicate') return { kind: 'duplicate' };
      if (reply[0] === 'in_flight') return { kind: 'in_flight', remainingMs: reply[1] };
    }
    throw new RedisError('ERR_REDIS_REPLY', 'unexpected reply from the dedup claim script');
  }

  async accept(id: string, token: string, retentionMs: number, mac: string, acceptedMacs: readonly string[]): Promise<SharedAccept> {
    const message = JSON.stringify({ id, outcome: 'accepted', mac });
    const args = [token, String(retentionMs), this.channel, message, acceptedValue(mac), String(DEDUP_VALUE_MAX_BYTES), ...acceptedMacs.map(acceptedValue)];
    const r = await this.connection.call('dedup_accept', async (c) => {
      // Written whatever the replicas (the app has the event); acknowledged only once they hold it.
      const accepted = await ACCEPT.run(c, [this.key(id), this.waitingKey(id)], args);
      await replicasInSync(c, this.wait);
      await waitForReplicas(c, this.wait);
      return accepted;
    });
    if (r === 1) return 'held';
    if (r === 2) return 'already';
    if (r === 0) return 'lapsed';
    throw new RedisError('ERR_REDIS_REPLY', 'unexpected reply from the dedup accept script');
  }

  async release(id: string, token: string): Promise<boolean> {
    const message = JSON.stringify({ id, outcome: 'released' });
    const r = await this.connection.call('dedup_release', (c) => RELEASE.run(c, [this.key(id), this.waitingKey(id)], [token, this.channel, message, String(DEDUP_VALUE_MAX_BYTES)]));
    return r === 1;
  }

  async backfill(id: string, remainingMs: number, mac: string): Promise<void> {
    await this.connection.call('dedup_backfill', async (c) => {
      // Replicated like an accept: a failover must not forget what the app was given.
      await replicasInSync(c, this.wait);
      await c.sendCommand(['SET', this.key(id), acceptedValue(mac), 'PX', String(Math.max(1, Math.round(remainingMs)))]);
      await waitForReplicas(c, this.wait);
    });
  }

  async onSettled(listener: (id: string, outcome: InFlightOutcome, mac: string | null) => void): Promise<void> {
    await this.connection.subscribe(this.channel, (message) => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(message);
      } catch {
        return;
      }
      const { id, outcome, mac } = (parsed ?? {}) as { id?: unknown; outcome?: unknown; mac?: unknown };
      if (typeof id === 'string' && (outcome === 'accepted' || outcome === 'released')) listener(id, outcome, typeof mac === 'string' ? mac : null);
    });
  }

  onRestored(hook: () => void): void {
    this.connection.onRestored(hook);
  }

  silentForMs(): number {
    return this.connection.silentForMs();
  }

  private key(id: string): string {
    return this.keyspace.key(DEDUP_KEY_OWNER, id);
  }

  private waitingKey(id: string): string {
    return this.keyspace.key(DEDUP_WAITING_KEY_OWNER, id);
  }
}
