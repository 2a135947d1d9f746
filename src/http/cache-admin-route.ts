import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../observability/logger.js';
import { cacheRevocationHook, type AllowCache, type DecisionMetrics } from '../decision/index.js';
import { applyTo, type Revocation, type RevocationPublisher } from '../lib/revocation-hook.js';
import { DECISION_SOURCE_HEADER } from '../edge/decision-headers.js';

export interface CacheAdminOptions {
  readonly cache: Pick<AllowCache, 'revokeUser' | 'revokeAll'>;
  /** The fleet's fan-out: with Redis, every replica sharing the key prefix purges too. */
  readonly revocations: RevocationPublisher;
  readonly metrics: DecisionMetrics;
  readonly logger: Logger;
}

/** A JSON answer of the purge. Not a decision: it carries no decision source, but for its refusal. */
function json(res: ServerResponse, status: number, body: object, refused = false): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  const headers = ['content-type', 'application/json', 'content-length', String(Buffer.byteLength(text)), 'cache-control', 'no-store'];
  if (refused) headers.push(DECISION_SOURCE_HEADER, 'rejected');
  res.writeHead(status, headers).end(text);
}

/**
 * `DELETE /sidecar/cache[?userReference=R]`: a purge by hand, here at once (counted as `manual`),
 * then through the fleet's fan-out like a revocation, so every replica sharing the Redis prefix
 * purges too. Answers `{"purged": n}` (this replica's entries) once every replica will learn it;
 * when they cannot (Redis unavailable) 503 `revocation_not_shared` with this replica's count: the
 * purge here is done, the operator asks again.
 */
export function cacheAdminRoute(o: CacheAdminOptions): (req: IncomingMessage, res: ServerResponse) => void {
  const here = cacheRevocationHook(o.cache, o.metrics.purged, 'manual');
  return (req, res) => {
    req.resume();
    const q = req.url!.indexOf('?');
    const users = q === -1 ? [] : new URLSearchParams(req.url!.slice(q + 1)).getAll('userReference');
    if (users.length > 1 || users[0] === '') {
      json(res, 400, { error: 'invalid_request', field: 'userReference', detail: 'userReference must be one non-empty string' }, true);
      return;
    }
    const user = users[0];
    const revocation: Revocation = user !== undefined ? { scope: 'user', userReference: user } : { scope: 'all' };
    const purged = applyTo(here, revocation);
    o.logger.info({ event: 'cache_purged', trigger: 'manual', scope: revocation.scope, purged });
    o.revocations.publish(revocation).then(
      () => json(res, 200, { purged }),
      (err: unknown) => {
        o.logger.warn({ event: 'cache_purge_not_shared', scope: revocation.scope, err }, 'manual purge done here but not shared with the other replicas');
        json(res, 503, { error: 'revocation_not_shared', detail: 'purged on this replica; the other replicas could not be told (Redis unavailable): ask again', purged });
      },
    );
  };
}
