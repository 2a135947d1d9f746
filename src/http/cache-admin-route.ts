import type { Request, Response } from 'express';
import type { Logger } from 'pino';
import { cacheRevocationHook, type AllowCache, type DecisionMetrics } from '../decision/index.js';
import { applyTo, type Revocation, type RevocationPublisher } from '../lib/revocation-hook.js';

export interface CacheAdminOptions {
  readonly cache: Pick<AllowCache, 'revokeUser' | 'revokeAll'>;
  /** The fleet's fan-out: with Redis, every replica sharing the key prefix purges too. */
  readonly revocations: RevocationPublisher;
  readonly metrics: DecisionMetrics;
  readonly logger: Logger;
}

/**
 * `DELETE /sidecar/cache[?userReference=R]`: a purge by hand, here at once (counted as `manual`),
 * then through the fleet's fan-out like a revocation, so every replica sharing the Redis prefix
 * purges too. Answers `{"purged": n}` (this replica's entries) once every replica will learn it;
 * when they cannot (Redis unavailable) 503 `revocation_not_shared` with this replica's count: the
 * purge here is done, the operator asks again.
 */
export function cacheAdminRoute(o: CacheAdminOptions): (req: Request, res: Response) => void {
  const here = cacheRevocationHook(o.cache, o.metrics.purged, 'manual');
  return (req, res) => {
    const user = req.query.userReference;
    if (user !== undefined && (typeof user !== 'string' || user === '')) {
      res.status(400).json({ error: 'invalid_request', field: 'userReference', detail: 'userReference must be one non-empty string' });
      return;
    }
    const revocation: Revocation = typeof user === 'string' ? { scope: 'user', userReference: user } : { scope: 'all' };
    const purged = applyTo(here, revocation);
    o.logger.info({ event: 'cache_purged', trigger: 'manual', scope: revocation.scope, purged });
    o.revocations.publish(revocation).then(
      () => void res.json({ purged }),
      (err: unknown) => {
        o.logger.warn({ event: 'cache_purge_not_shared', scope: revocation.scope, err }, 'manual purge done here but not shared with the other replicas');
        res.status(503).json({ error: 'revocation_not_shared', detail: 'purged on this replica; the other replicas could not be told (Redis unavailable): ask again', purged });
      },
    );
  };
}
