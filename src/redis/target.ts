import type { RedisConfig } from '../config/index.js';
import type { RedisTargetSpec } from './link.js';

/** Where Redis is now, read from the configuration's secrets (they follow rotation). */
export function redisTargetOf(redis: RedisConfig): RedisTargetSpec {
  const t = redis.target;
  const tlsCa = redis.tlsCa?.current();
  const ca = tlsCa === undefined ? {} : { tlsCa };
  switch (t.kind) {
    case 'single':
      return { kind: 'single', url: t.url.current().href, ...ca };
    case 'cluster':
      return { kind: 'cluster', urls: t.nodes.current().map((u) => u.href), ...ca };
    case 'sentinel':
      return { kind: 'sentinel', urls: t.sentinels.current().map((u) => u.href), masterName: t.masterName, ...ca };
  }
}
