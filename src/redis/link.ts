import { ClusterLink } from './cluster-link.js';
import type { LinkOptions, RedisLink, RedisTargetSpec } from './link-types.js';
import { SentinelLink } from './sentinel-link.js';
import { SingleLink } from './single-link.js';

export { REDIS_RECONNECT_MAX_MS, REDIS_RECONNECT_MIN_MS, type LinkEvents, type LinkOptions, type RedisLink, type RedisTargetSpec } from './link-types.js';

/** Builds the link for `spec`; nothing connects until {@link RedisLink.connect}. */
export function createLink(spec: RedisTargetSpec, options: LinkOptions): RedisLink {
  switch (spec.kind) {
    case 'single':
      return new SingleLink(spec, options);
    case 'cluster':
      return new ClusterLink(spec, options);
    case 'sentinel':
      return new SentinelLink(spec, options);
  }
}
