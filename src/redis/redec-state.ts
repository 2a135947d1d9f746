import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { LedgerEntry, ObligationLedger, ReconcileLease, RunSummary } from '../redec/index.js';
import type { RedisConnection } from './connection.js';
import { RedisError } from './errors.js';
import type { RedisKeyspace } from './keyspace.js';
import { RedisScript } from './script.js';

/** Owner segment of the reconciler's keys: `redec:lease`, `redec:summary`, `redec:first-seen`, `redec:handed`. */
export const REDEC_KEY_OWNER = 'redec';

/**
 * KEYS[1] first-seen hash, KEYS[2] handed hash; ARGV[1] now (ms), ARGV[2..] listed identities.
 * Sets first-seen of new identities and answers per identity `{firstSeen, handed or ''}`.
 */
const SEEN = new RedisScript(`
local out = {}
for i = 2, #ARGV do
  redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[1])
  out[#out + 1] = redis.call('HGET', KEYS[1], ARGV[i])
  out[#out + 1] = redis.call('HGET', KEYS[2], ARGV[i]) or ''
end
return out
`);

/**
 * Identities per Redis call: each call stays a few milliseconds, far inside
 * `--redis-command-timeout-ms`, however long the listing (one script over 10,000 took 140-340 ms
 * on a loaded machine, too close to the 500 ms default).
 */
const CHUNK = 1000;

/** KEYS[1] first-seen hash, KEYS[2] handed hash; ARGV: identities to forget in both. */
const FORGET = new RedisScript(`
redis.call('HDEL', KEYS[1], unpack(ARGV))
redis.call('HDEL', KEYS[2], unpack(ARGV))
return 1
`);

/** KEYS[1] lease; ARGV[1] token, ARGV[2] lease (ms). 1 renewed, 0 not ours any more. */
const RENEW = new RedisScript(`
if redis.call('GET', KEYS[1]) == 'running:' .. ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
`);

/**
 * KEYS[1] lease, KEYS[2] summary; ARGV[1] token, ARGV[2] 'ok' or 'failed', ARGV[3] hold (ms),
 * ARGV[4] pending, ARGV[5] oldest first-seen ('' when none), ARGV[6] now.
 * Ok: the lease is kept as done for the hold and the summary written; failed: released.
 */
const FINISH = new RedisScript(`
if redis.call('GET', KEYS[1]) ~= 'running:' .. ARGV[1] then return 0 end
if ARGV[2] == 'ok' then
  redis.call('SET', KEYS[1], 'done:' .. ARGV[1], 'PX', ARGV[3])
  redis.call('HSET', KEYS[2], 'pending', ARGV[4], 'oldest', ARGV[5], 'at', ARGV[6])
else
  redis.call('DEL', KEYS[1])
end
return 1
`);

export interface RedisRedecStateOptions {
  readonly connection: RedisConnection;
  readonly keyspace: RedisKeyspace;
  /** How long a running lease lives without renewal (ms). */
  readonly leaseMs: number;
  /** How long the lease is held as done after a complete run (ms): about the interval. */
  readonly holdMs: number;
  readonly now: () => number;
}

/**
 * The reconciler's bookkeeping in Redis: first-seen and handed times (so a restart or another
 * replica keeps the clock), the lease that lets one replica at a time run (`SET NX PX` with a
 * token, renewed and released by token-guarded scripts), and the summary the others report.
 */
export class RedisRedecState implements ObligationLedger, ReconcileLease {
  private readonly keys;
  private token: string | null = null;
  private renewedAt = 0;

  constructor(private readonly options: RedisRedecStateOptions) {
    if (!(options.leaseMs > 0) || !(options.holdMs > 0)) throw new RangeError('RedisRedecState: leaseMs and holdMs must be > 0');
    const k = (name: string): string => options.keyspace.key(REDEC_KEY_OWNER, name);
    this.keys = { lease: k('lease'), summary: k('summary'), firstSeen: k('first-seen'), handed: k('handed') };
  }

  /** Only the lease holder syncs, so the chunks of one sync never interleave with another replica's. */
  async sync(identities: readonly string[], now: number): Promise<Map<string, LedgerEntry>> {
    const out = new Map<string, LedgerEntry>();
    for (let i = 0; i < identities.length; i += CHUNK) {
      const chunk = identities.slice(i, i + CHUNK);
      const reply = await this.options.connection.call('redec_sync', (c) => SEEN.run(c, [this.keys.firstSeen, this.keys.handed], [String(now), ...chunk]));
      if (!Array.isArray(reply) || reply.length !== 2 * chunk.length) throw new RedisError('ERR_REDIS_REPLY', 'unexpected reply from the REDEC ledger');
      chunk.forEach((id, k) => {
        // What Redis hands back is checked: a first-seen that is not a time in the past counts
        // from now (never earlier: that would hand an obligation before its grace).
        const firstSeen = Number(reply[2 * k]);
        const handed = Number(reply[2 * k + 1]);
        out.set(id, {
          firstSeenAt: Number.isSafeInteger(firstSeen) && firstSeen >= 0 && firstSeen <= now ? firstSeen : now,
          handedAt: reply[2 * k + 1] !== '' && Number.isSafeInteger(handed) && handed >= 0 ? handed : null,
        });
      });
    }
    // Forget what left the listing, first-seen and handed alike.
    // HSCAN in steps, like the writes above: one HKEYS over a long listing could outlast the deadline.
    const gone: string[] = [];
    let cursor = '0';
    do {
      const reply = await this.options.connection.call('redec_sync', (c) => c.sendCommand(['HSCAN', this.keys.firstSeen, cursor, 'COUNT', String(CHUNK)]));
      if (!Array.isArray(reply) || typeof reply[0] !== 'string' || !Array.isArray(reply[1])) throw new RedisError('ERR_REDIS_REPLY', 'unexpected reply to HSCAN');
      const fields = reply[1] as unknown[];
      for (let i = 0; i < fields.length; i += 2) {
        const field = String(fields[i]);
        if (!out.has(field)) gone.push(field);
      }
      cursor = reply[0];
    } while (cursor !== '0');
    for (let i = 0; i < gone.length; i += CHUNK) {
      const chunk = gone.slice(i, i + CHUNK);
      await this.options.connection.call('redec_sync', (c) => FORGET.run(c, [this.keys.firstSeen, this.keys.handed], chunk));
    }
    return out;
  }

  async markHanded(identities: readonly string[], at: number): Promise<void> {
    if (identities.length === 0) return;
    await this.options.connection.call('redec_mark', (c) => c.sendCommand(['HSET', this.keys.handed, ...identities.flatMap((id) => [id, String(at)])]));
  }

  // The lease is counted from before the command is sent, never from its answer: Redis started the
  // clock when it ran the command, which may be long before a slow (or busy) reply reaches us, so a
  // time taken after the reply could believe a lease that already lapsed and was taken (CI caught it).
  async acquire(): Promise<boolean> {
    const token = randomUUID();
    const sentAt = performance.now();
    const got = await this.options.connection.call('redec_lease', (c) =>
      c.sendCommand(['SET', this.keys.lease, `running:${token}`, 'NX', 'PX', String(this.options.leaseMs)]),
    );
    if ((got as unknown) !== 'OK') return false;
    this.token = token;
    this.renewedAt = sentAt;
    return true;
  }

  async renew(): Promise<boolean> {
    if (this.token === null) return false;
    if (performance.now() - this.renewedAt < this.options.leaseMs / 3) return true;
    const token = this.token;
    const sentAt = performance.now();
    const ok = await this.options.connection.call('redec_lease', (c) => RENEW.run(c, [this.keys.lease], [token, String(this.options.leaseMs)]));
    if (ok !== 1) return false;
    this.renewedAt = sentAt;
    return true;
  }

  async finish(summary: RunSummary | null): Promise<void> {
    const token = this.token;
    this.token = null;
    if (token === null) return;
    await this.options.connection.call('redec_lease', (c) =>
      FINISH.run(
        c,
        [this.keys.lease, this.keys.summary],
        [token, summary ? 'ok' : 'failed', String(this.options.holdMs), String(summary?.pending ?? 0), String(summary?.oldestFirstSeenAt ?? ''), String(this.options.now())],
      ),
    );
  }

  async lastSummary(): Promise<RunSummary | null> {
    const h = (await this.options.connection.call('redec_lease', (c) => c.sendCommand(['HGETALL', this.keys.summary]))) as unknown;
    const map = toMap(h);
    if (map.pending === undefined) return null;
    return { pending: Number(map.pending), oldestFirstSeenAt: map.oldest ? Number(map.oldest) : null };
  }
}

/** HGETALL answers a flat array (RESP2) or a map (RESP3). */
function toMap(reply: unknown): Record<string, string> {
  if (Array.isArray(reply)) {
    const out: Record<string, string> = {};
    for (let i = 0; i + 1 < reply.length; i += 2) out[String(reply[i])] = String(reply[i + 1]);
    return out;
  }
  if (reply && typeof reply === 'object') return Object.fromEntries(Object.entries(reply as Record<string, unknown>).map(([k, v]) => [k, String(v)]));
  return {};
}
