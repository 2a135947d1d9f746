/** scripts/bundle-config.mjs, for the tests that read it. */
export declare const REDIS_COMMANDS_USED: readonly string[];
