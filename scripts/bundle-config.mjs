// What scripts/bundle.mjs needs to know, apart so that tests can read it without bundling.

/**
 * The Redis client's command table, cut to what runs: `@redis/client` attaches each of its ~500
 * commands (and their camelCase twins) to every client class it makes, from one index that
 * requires each command's module. The sidecar sends every command of its own through
 * `sendCommand` (src/redis/); the client itself names AUTH, HELLO, CLIENT SETNAME and READONLY in
 * its handshake and CLUSTER SLOTS in cluster discovery. The index is replaced by a table of those
 * (and the constants the package's index re-exports): a pod with Redis then builds a client of
 * five commands instead of some thousand methods (idle RSS 91 -> 69 MiB, docs/performance.md,
 * Footprint). A command the table lacks would be a method missing from the client:
 * test/packaging/bundle.test.ts holds the table to every command the library names or calls on
 * its own clients.
 */
export const REDIS_COMMANDS_USED = ['AUTH', 'HELLO', 'CLIENT_SETNAME', 'READONLY', 'CLUSTER_SLOTS'];
