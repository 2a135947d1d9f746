export { ConfigError, type ConfigErrorCode } from './errors.js';
export { OTEL_VARIABLES, loadServeConfig, resolveRedecListingBounds, resolveRedecListingFields, resolveRedisConfig, resolveUpstreamConfig, resolveWebhookMaxBodyBytes, resolveWebhookSecrets, parseWebhookSecrets, parseRequiredHeader } from './load.js';
export { createSecretMetrics, watchSecrets, type SecretMetrics, type SecretWatch } from './metrics.js';
export * from './options.js';
export { fileSecret, isFileSecret, secretRoleOf, staticSecret, type Secret, type SecretEvent, type SecretParser } from './secret.js';
export type * from './types.js';
export { redisSecrets, serveSecrets } from './types.js';
export { ENV_PREFIX, unknownEnvVariables, type UnknownVariable } from './unknown-env.js';
export { LOOPBACK_HOSTS, type ListenerBounds, type ListenersBoundsConfig } from './listener-bounds.js';
