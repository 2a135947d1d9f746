export { ConfigError, type ConfigErrorCode } from './errors.js';
export { loadServeConfig, resolveUpstreamConfig, parseWebhookSecrets, parseRequiredHeader } from './load.js';
export * from './options.js';
export { fileSecret, staticSecret, type Secret, type SecretEvent, type SecretParser } from './secret.js';
export type * from './types.js';
