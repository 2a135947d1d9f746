/**
 * Whether the ALLOW cache may answer now. Read on every cache hit, so it is a field, never a
 * computation; whoever knows why the cache cannot be trusted (the fleet's invalidation, which
 * could not read the shared log while another replica may have revoked) sets it.
 *
 * While `trusted` is false every check goes to the service (and refreshes the cache); nothing is
 * purged, and the cache serves again once it has caught up.
 */
export class CacheTrust {
  trusted = true;
}
