import { ConfigError } from './errors.js';
import {
  DEFAULT_WEBHOOK_BODY_TIMEOUT_MS,
  DEFAULT_WEBHOOK_DEDUP_LEASE_MARGIN_MS,
  DEFAULT_WEBHOOK_DEDUP_MAX_ENTRIES,
  DEFAULT_WEBHOOK_DEDUP_RETENTION_MS,
  DEFAULT_WEBHOOK_FORWARD_TIMEOUT_MS,
  DEFAULT_WEBHOOK_MAX_BODY_BYTES,
  DEFAULT_WEBHOOK_MAX_UNVERIFIED_BYTES,
  DEFAULT_WEBHOOK_PATH,
  DEFAULT_WEBHOOK_QUEUE_HORIZON_MS,
  DEFAULT_WEBHOOK_QUEUE_MAX_EVENTS,
  DEFAULT_WEBHOOK_TOLERANCE_S,
  WEBHOOK_DELIVERY_MODES,
  type WebhookDeliveryMode,
} from './options.js';
import { HEADER_NAME, Reader } from './reader.js';
import type { Secret, SecretParser } from './secret.js';
import type { RawEnv, RawFlags, RequiredHeader, WebhookConfig } from './types.js';

// The webhook capability's flags: the ingress, its secrets, dedup and the durable queue.

/** Headers the service will not let the portal replace, so they can never be the custom header. */
const FORBIDDEN_REQUIRED_HEADER = /^(x-service-.*|host|content-type|content-length|transfer-encoding|connection)$/i;

/** One `whsec_` secret per line; blank lines and `#` comments are ignored. */
export const parseWebhookSecrets: SecretParser<readonly string[]> = (text) => {
  const secrets = text
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
  if (secrets.length === 0) return { error: 'no webhook secret given' };
  const bad = secrets.findIndex((s) => !s.startsWith('whsec_') || s.length <= 'whsec_'.length);
  if (bad >= 0) return { error: `secret #${bad + 1} does not start with "whsec_"` };
  return { value: Object.freeze(secrets) };
};

/** `Name: value`, as configured in the service's portal. */
export const parseRequiredHeader: SecretParser<RequiredHeader> = (text) => {
  const line = text.trim();
  const colon = line.indexOf(':');
  if (colon <= 0) return { error: 'expected "Name: value"' };
  const name = line.slice(0, colon).trim();
  const value = line.slice(colon + 1).trim();
  if (!HEADER_NAME.test(name)) return { error: `"${name}" is not a valid header name` };
  if (FORBIDDEN_REQUIRED_HEADER.test(name)) return { error: `"${name}" cannot be a custom header (the service forbids it)` };
  if (value === '') return { error: 'the header value is empty' };
  return { value: Object.freeze({ name: name.toLowerCase(), value }) };
};

export function readWebhooks(r: Reader): WebhookConfig | null {
  const appUrl = r.url('app-webhook-url', false);
  const path = r.raw('webhook-path');
  const webhookPath = path?.value ?? DEFAULT_WEBHOOK_PATH;
  if (path && !/^\/[\x21-\x7e]*$/.test(webhookPath)) r.problem(path.label, `must start with "/" and hold no spaces, got "${path.value}"`);
  const secrets = r.secret('webhook-secret', parseWebhookSecrets, true);
  const requiredHeader = r.secret('webhook-required-header', parseRequiredHeader);
  const toleranceS = r.int('webhook-tolerance-s', DEFAULT_WEBHOOK_TOLERANCE_S, 1, 86_400);
  const maxBodyBytes = r.int('webhook-max-body-bytes', DEFAULT_WEBHOOK_MAX_BODY_BYTES, 1024, 64 * 1024 * 1024);
  const forwardTimeoutMs = r.int('webhook-forward-timeout-ms', DEFAULT_WEBHOOK_FORWARD_TIMEOUT_MS, 1, 600_000);
  const delivery = r.oneOf<WebhookDeliveryMode>('webhook-delivery', WEBHOOK_DELIVERY_MODES, 'passthrough');
  const dedupRetentionMs = r.int('webhook-dedup-retention-ms', DEFAULT_WEBHOOK_DEDUP_RETENTION_MS, 60_000, 30 * 86_400_000);
  const dedupMaxEntries = r.int('webhook-dedup-max-entries', DEFAULT_WEBHOOK_DEDUP_MAX_ENTRIES, 1000, 100_000_000);
  // --- unauthenticated load (issue 8) ---
  const maxUnverifiedBytes = r.int('webhook-max-unverified-bytes', DEFAULT_WEBHOOK_MAX_UNVERIFIED_BYTES, 1024, 4 * 1024 * 1024 * 1024);
  const bodyTimeoutMs = r.int('webhook-body-timeout-ms', DEFAULT_WEBHOOK_BODY_TIMEOUT_MS, 1, 600_000);
  if (maxUnverifiedBytes < maxBodyBytes) {
    r.problem('--webhook-max-unverified-bytes', `must be at least --webhook-max-body-bytes (${maxBodyBytes}), or no delivery of the largest size could ever be read`);
  }
  // --- end ---
  const dedupLeaseMs = readDedupLease(r, forwardTimeoutMs);
  const queueHorizonMs = r.int('webhook-queue-horizon-ms', DEFAULT_WEBHOOK_QUEUE_HORIZON_MS, 1, 365 * 86_400_000);
  const queueMaxEvents = r.int('webhook-queue-max-events', DEFAULT_WEBHOOK_QUEUE_MAX_EVENTS, 1, 100_000_000);

  if (!appUrl) {
    if (secrets || requiredHeader) {
      r.problem('--app-webhook-url', 'is required when webhook secrets or a required header are set (the ingress is off without it)');
    }
    return null;
  }
  if (!secrets && !r.problems.some((p) => p.startsWith('--webhook-secret'))) {
    r.problem('--webhook-secret', 'one of --webhook-secret or --webhook-secret-file is required with --app-webhook-url');
  }
  if (!secrets) return null;
  return {
    appUrl,
    path: webhookPath,
    secrets,
    toleranceS,
    maxBodyBytes,
    requiredHeader,
    forwardTimeoutMs,
    delivery,
    dedupRetentionMs,
    dedupMaxEntries,
    maxUnverifiedBytes,
    bodyTimeoutMs,
    dedupLeaseMs,
    queueHorizonMs,
    queueMaxEvents,
  };
}


/** The claim must outlive a forward, or a second replica could forward the same event meanwhile. */
function readDedupLease(r: Reader, forwardTimeoutMs: number): number {
  const raw = r.raw('webhook-dedup-lease-ms');
  const leaseMs = r.int('webhook-dedup-lease-ms', forwardTimeoutMs + DEFAULT_WEBHOOK_DEDUP_LEASE_MARGIN_MS, 1, 3_600_000);
  if (raw && leaseMs <= forwardTimeoutMs && !r.problems.some((p) => p.startsWith(raw.label))) {
    r.problem(raw.label, `must exceed --webhook-forward-timeout-ms (${forwardTimeoutMs}), got ${leaseMs}`);
  }
  return leaseMs;
}

/**
 * Resolves `--webhook-secret` / `--webhook-secret-file` alone, for `webhook dead-letters replay`,
 * which verifies each dead letter again before it puts it back.
 * @throws ConfigError naming the flag.
 */
export function resolveWebhookSecrets(flags: RawFlags, env: RawEnv = process.env): Secret<readonly string[]> {
  const r = new Reader(flags, env);
  const secrets = r.secret('webhook-secret', parseWebhookSecrets, true);
  if (!secrets && r.problems.length === 0) r.problem('--webhook-secret', "is required (or --webhook-secret-file): serve's secrets, to verify each dead letter again before replaying it");
  if (r.problems.length > 0 || !secrets) throw new ConfigError(r.problems);
  return secrets;
}

