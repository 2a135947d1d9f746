/**
 * Names of every key and channel the sidecar uses in Redis, all under `--redis-key-prefix` (default
 * `consent-sidecar:`) so several deployments can share one Redis. The second segment names the
 * owner, reserved as follows:
 *
 * | prefix | owner |
 * |---|---|
 * | `dedup:<event id>` (keys), `dedup-settled` (channel) | shared webhook deduplication |
 * | `invalidate` (channel) | cache invalidation fan-out |
 * | `queue:*` | the durable webhook queue (streams, dead letters) |
 * | `redec:*` | the REDEC reconciler's bookkeeping |
 *
 * @example
 * new RedisKeyspace('consent-sidecar:').key('dedup', 'evt_1') // 'consent-sidecar:dedup:evt_1'
 */
export class RedisKeyspace {
  constructor(readonly prefix: string) {
    if (typeof prefix !== 'string') throw new TypeError('RedisKeyspace: prefix must be a string');
  }

  /** `<prefix><owner>:<id>`; `id` is used as is (Redis keys are binary-safe). */
  key(owner: string, ...parts: string[]): string {
    return [this.prefix + owner, ...parts].join(':');
  }

  /** `<prefix><name>`: a pub/sub channel. */
  channel(name: string): string {
    return this.prefix + name;
  }
}
