/**
 * Names of every key and channel the sidecar uses in Redis, all under `--redis-key-prefix` (default
 * `consent-sidecar:`) wrapped in one hash tag, `{consent-sidecar:}`, so that every key of one
 * deployment lands on one slot of a Redis Cluster and every script (which touches several keys at
 * once) runs there. Several deployments share one Redis by prefix. The segment after the tag names
 * the owner, reserved as follows:
 *
 * | name | owner |
 * |---|---|
 * | `dedup:<event id>`, `dedup-waiting:<event id>` (keys), `dedup-settled` (channel) | shared webhook deduplication |
 * | `invalidations`, `invalidations-epoch` (keys), `invalidate`, `invalidate-echo:<random>` (channels) | the cache invalidation log |
 * | `queue:*` | the durable webhook queue (streams, dead letters, delivered markers, forward claims) |
 * | `redec:*` | the REDEC reconciler's bookkeeping |
 * | `health` | the health probe's write |
 *
 * @example
 * new RedisKeyspace('consent-sidecar:').key('dedup', 'evt_1') // '{consent-sidecar:}dedup:evt_1'
 */
export class RedisKeyspace {
  /** `{<prefix>}`: the hash tag every key starts with. */
  readonly tag: string;

  constructor(readonly prefix: string) {
    if (typeof prefix !== 'string') throw new TypeError('RedisKeyspace: prefix must be a string');
    // A brace inside would end the tag early and split the deployment over several slots.
    if (/[{}]/.test(prefix)) throw new RangeError('RedisKeyspace: prefix must not contain { or }');
    this.tag = `{${prefix}}`;
  }

  /** `{<prefix>}<owner>:<part>:…`; parts are used as is (Redis keys are binary-safe). */
  key(owner: string, ...parts: string[]): string {
    return [this.tag + owner, ...parts].join(':');
  }

  /** `{<prefix>}<name>`: a pub/sub channel. */
  channel(name: string): string {
    return this.tag + name;
  }
}
