export { ConfigError, type ConfigErrorCode } from './errors.js';
export { loadServeConfig, resolveRedecListingFields, resolveRedisConfig, resolveUpstreamConfig, resolveWebhookSecrets, parseWebhookSecrets, parseRequiredHeader } from './load.js';
export { createSecretMetrics, watchSecrets, type SecretMetrics } from './metrics.js';
export * from './options.js';
export { fileSecret, isFileSecret, secretRoleOf, staticSecret, type Secret, type SecretEvent, type SecretParser } from './secret.js';
export type * from './types.js';
export { redisSecrets } from './types.js';
export { ENV_PREFIX, unknownEnvVariables, type UnknownVariable } from './unknown-env.js';
