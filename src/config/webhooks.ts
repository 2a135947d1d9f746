import { ConfigError } from './errors.js';
import type { OptionSpec } from './option-spec.js';
import { readQueue, type WebhookQueueConfig } from './queue.js';
import { HEADER_NAME, Reader, type RawEnv, type RawFlags } from './reader.js';
import { secretLines, type Secret, type SecretParser } from './secret.js';

// The webhook capability's flags: the ingress, its secrets, the forward to the app and dedup; with
// Redis, the shared claim and the durable queue (queue.ts).

export const DEFAULT_WEBHOOK_PATH = '/webhooks';
/** Timestamp tolerance of webhook signatures, both directions (s). */
export const DEFAULT_WEBHOOK_TOLERANCE_S = 300;
export const DEFAULT_WEBHOOK_MAX_BODY_BYTES = 1_048_576;
/**
 * Unauthenticated load on the ingress (docs/webhooks.md, Unauthenticated load): bytes held at once, across all connections, for
 * deliveries whose signature is not verified yet (16 MiB); beyond it deliveries get 503 and the
 * connection is closed.
 */
export const DEFAULT_WEBHOOK_MAX_UNVERIFIED_BYTES = 16_777_216;
/** Time a delivery's body has to arrive once its headers passed (ms); beyond it, 503 `body_timeout`. */
export const DEFAULT_WEBHOOK_BODY_TIMEOUT_MS = 10_000;
/** Slowest accepted unverified body (bytes a second, after a 2 s grace); slower senders are cut. */
export const DEFAULT_WEBHOOK_MIN_BODY_RATE_BYTES = 4096;
/** Time the app has to accept one forwarded event (ms). */
export const DEFAULT_WEBHOOK_FORWARD_TIMEOUT_MS = 10_000;
/** How long an accepted event id is remembered (ms); the service retries for about an hour. */
export const DEFAULT_WEBHOOK_DEDUP_RETENTION_MS = 86_400_000;
/** Accepted event ids remembered at most (oldest forgotten first). */
export const DEFAULT_WEBHOOK_DEDUP_MAX_ENTRIES = 1_000_000;
export const WEBHOOK_DELIVERY_MODES = ['passthrough', 'queue'] as const;
export type WebhookDeliveryMode = (typeof WEBHOOK_DELIVERY_MODES)[number];

export const WEBHOOK_OPTIONS: readonly OptionSpec[] = [
  { name: 'app-webhook-url', arg: '<url>', description: 'where verified events go: the default of --app-webhook-route (webhook ingress off without either)' },
  {
    name: 'app-webhook-route',
    arg: "<'GLOB=URL'>",
    description:
      'events whose type matches GLOB (* matches any run of characters) go to URL; repeatable, first match wins; events no route takes go to --app-webhook-url; with neither (nor --app-webhook-ignore), passthrough answers 503 unrouted and queue mode leaves them for a replica whose routes take them',
    repeatable: true,
  },
  {
    name: 'app-webhook-ignore',
    arg: '<GLOB>',
    description: 'event types the app does not want (GLOB as in --app-webhook-route): answered 200 ignored, counted, not forwarded; repeatable; a route that matches comes first, the default after',
    repeatable: true,
  },
  { name: 'webhook-path', arg: '<path>', description: 'path of the webhook ingress', defaultText: DEFAULT_WEBHOOK_PATH },
  {
    name: 'webhook-secret',
    arg: '<whsec_…>',
    description: 'webhook signing secret; repeat for rotation (all are accepted)',
    repeatable: true,
    secret: true,
  },
  { name: 'webhook-secret-file', arg: '<path>', description: 'file with one whsec_ secret per line; re-read when it changes' },
  {
    name: 'webhook-tolerance-s',
    arg: '<s>',
    description: 'signature timestamp tolerance, both directions',
    defaultText: String(DEFAULT_WEBHOOK_TOLERANCE_S),
  },
  {
    name: 'webhook-max-body-bytes',
    arg: '<bytes>',
    description: 'larger webhook bodies get 413',
    defaultText: String(DEFAULT_WEBHOOK_MAX_BODY_BYTES),
  },
  {
    name: 'webhook-max-unverified-bytes',
    arg: '<bytes>',
    description: 'bytes buffered at once, across all connections, for deliveries not verified yet; beyond, 503',
    defaultText: String(DEFAULT_WEBHOOK_MAX_UNVERIFIED_BYTES),
  },
  {
    name: 'webhook-body-timeout-ms',
    arg: '<ms>',
    description: "time a delivery's body has to arrive once its headers passed; beyond, 503",
    defaultText: String(DEFAULT_WEBHOOK_BODY_TIMEOUT_MS),
  },
  {
    name: 'webhook-peer-max-unverified',
    arg: '<bytes>',
    description: 'of --webhook-max-unverified-bytes, what one sender address may hold (behind an ingress every delivery may come from one address)',
    defaultText: 'a quarter of --webhook-max-unverified-bytes, at least --webhook-max-body-bytes',
  },
  {
    name: 'webhook-min-body-rate-bytes',
    arg: '<bytes>',
    description: 'slowest accepted delivery body, in bytes a second after a 2 s grace (0: off); slower, 503 and the connection is cut',
    defaultText: String(DEFAULT_WEBHOOK_MIN_BODY_RATE_BYTES),
  },
  { name: 'webhook-required-header', arg: '<"Name: value">', description: 'header every delivery must carry (not forwarded)', secret: true },
  { name: 'webhook-required-header-file', arg: '<path>', description: 'file holding "Name: value"; re-read when it changes' },
  {
    name: 'webhook-forward-timeout-ms',
    arg: '<ms>',
    description: 'time the app has to accept one event',
    defaultText: String(DEFAULT_WEBHOOK_FORWARD_TIMEOUT_MS),
  },
  {
    name: 'webhook-delivery',
    arg: '<mode>',
    description: 'passthrough (200 once the app accepted) or queue (needs --redis-url)',
    defaultText: 'passthrough',
  },
  {
    name: 'webhook-dedup-retention-ms',
    arg: '<ms>',
    description: 'how long accepted event ids are remembered',
    defaultText: String(DEFAULT_WEBHOOK_DEDUP_RETENTION_MS),
  },
  {
    name: 'webhook-dedup-max-entries',
    arg: '<n>',
    description: 'accepted event ids remembered at most',
    defaultText: String(DEFAULT_WEBHOOK_DEDUP_MAX_ENTRIES),
  },
];

/** Headers the service will not let the portal replace, so they can never be the custom header. */
const FORBIDDEN_REQUIRED_HEADER = /^(x-service-.*|host|content-type|content-length|transfer-encoding|connection)$/i;

/** One `whsec_` secret per line; blank lines and `#` comments are ignored. */
export const parseWebhookSecrets: SecretParser<readonly string[]> = (text) => {
  const secrets = secretLines(text);
  if (secrets.length === 0) return { error: 'no webhook secret given' };
  const bad = secrets.findIndex((s) => !s.startsWith('whsec_') || s.length <= 'whsec_'.length);
  if (bad >= 0) return { error: `secret #${bad + 1} does not start with "whsec_"` };
  return { value: Object.freeze(secrets) };
};

/** `--webhook-required-header "Name: value"`: a header every delivery must carry (not forwarded). */
export interface RequiredHeader {
  /** Lower-case header name. */
  readonly name: string;
  readonly value: string;
}

/** `Name: value`, as configured in the service's portal. */
export const parseRequiredHeader: SecretParser<RequiredHeader> = (text) => {
  const line = text.trim();
  const colon = line.indexOf(':');
  if (colon <= 0) return { error: 'expected "Name: value"' };
  const name = line.slice(0, colon).trim();
  const value = line.slice(colon + 1).trim();
  // Not quoted: a value written without its name ("Bearer abc: …") would be echoed into the logs.
  if (!HEADER_NAME.test(name)) return { error: 'what precedes ":" is not a valid header name (not quoted: it may hold the secret)' };
  if (FORBIDDEN_REQUIRED_HEADER.test(name)) return { error: `"${name}" cannot be a custom header (the service forbids it)` };
  if (value === '') return { error: 'the header value is empty' };
  return { value: Object.freeze({ name: name.toLowerCase(), value }) };
};

/** What an event type may hold, and `*`: a glob of `--app-webhook-route`. */
const ROUTE_GLOB = /^[A-Za-z0-9_.:*-]{1,256}$/;

/** `--app-webhook-ignore GLOB`, each checked; a problem names the flag and the glob. */
function readIgnores(r: Reader): string[] {
  const raw = r.list('app-webhook-ignore');
  if (!raw) return [];
  const globs: string[] = [];
  for (const value of raw.values) {
    const glob = value.trim();
    if (!ROUTE_GLOB.test(glob)) r.problem(raw.label, `expected a GLOB made of event type characters and *, got "${value}"`);
    else if (globs.includes(glob)) r.problem(raw.label, `"${glob}" is given twice`);
    else globs.push(glob);
  }
  return globs;
}

/** `--app-webhook-route 'GLOB=URL'`, each checked; a problem names the flag and the route. */
function readRoutes(r: Reader): { glob: string; url: URL }[] {
  const raw = r.list('app-webhook-route');
  if (!raw) return [];
  const routes: { glob: string; url: URL }[] = [];
  for (const value of raw.values) {
    const eq = value.indexOf('=');
    const glob = eq > 0 ? value.slice(0, eq).trim() : '';
    const target = eq > 0 ? value.slice(eq + 1).trim() : '';
    if (!ROUTE_GLOB.test(glob)) {
      r.problem(raw.label, `expected 'GLOB=URL' with GLOB made of event type characters and *, got "${value}"`);
      continue;
    }
    if (routes.some((x) => x.glob === glob)) {
      r.problem(raw.label, `the route "${glob}" is given twice (the first would take every event of the second)`);
      continue;
    }
    let url: URL;
    try {
      url = new URL(target);
    } catch {
      r.problem(raw.label, `route "${glob}": "${target}" is not a valid URL`);
      continue;
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') r.problem(raw.label, `route "${glob}": must be an http:// or https:// URL`);
    else if (url.username || url.password) r.problem(raw.label, `route "${glob}": the URL must not carry credentials`);
    else routes.push({ glob, url });
  }
  return routes;
}

/** The webhook ingress (`--app-webhook-url`, `--app-webhook-route`, `--webhook-*`); with Redis, the claim and the queue (queue.ts). */
export interface WebhookConfig extends WebhookQueueConfig {
  /** `--app-webhook-url`: where events no route takes go; null when only routes are given. */
  readonly appUrl: URL | null;
  /** `--app-webhook-route 'GLOB=URL'`, in the order given (first match wins). */
  readonly routes: readonly { readonly glob: string; readonly url: URL }[];
  /** `--app-webhook-ignore GLOB`: types answered 200 `ignored` and not forwarded (after the routes, before the default). */
  readonly ignore: readonly string[];
  readonly path: string;
  /** All accepted secrets, in the order given (rotation). */
  readonly secrets: Secret<readonly string[]>;
  readonly toleranceS: number;
  readonly maxBodyBytes: number;
  readonly requiredHeader: Secret<RequiredHeader> | null;
  readonly forwardTimeoutMs: number;
  readonly delivery: WebhookDeliveryMode;
  readonly dedupRetentionMs: number;
  readonly dedupMaxEntries: number;
  // --- unauthenticated load (docs/webhooks.md, Unauthenticated load) ---
  /** Bytes of bodies not verified yet held at once, across all connections; beyond, 503. */
  readonly maxUnverifiedBytes: number;
  /** Of those, what one sender address may hold (`--webhook-peer-max-unverified`). */
  readonly maxUnverifiedBytesPerPeer: number;
  /** Time a delivery's body has to arrive once its headers passed (ms); beyond, 503 `body_timeout`. */
  readonly bodyTimeoutMs: number;
  /** Slowest accepted body, in bytes a second after a short grace (`--webhook-min-body-rate-bytes`; 0: off); slower, 503 `body_too_slow`. */
  readonly minBodyRateBytes: number;
}

/** The ingress's flags; null when it is off (no `--app-webhook-url` nor route) or cannot start. */
export function readWebhooks(r: Reader): WebhookConfig | null {
  const appUrl = r.url('app-webhook-url', false);
  const routes = readRoutes(r);
  const routed = appUrl !== null || routes.length > 0 || r.list('app-webhook-route') !== undefined;
  const ignore = readIgnores(r);
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
  // Unauthenticated load: what a sender without a signature can make us hold, and for how long.
  const maxUnverifiedBytes = r.int('webhook-max-unverified-bytes', DEFAULT_WEBHOOK_MAX_UNVERIFIED_BYTES, 1024, 4 * 1024 * 1024 * 1024);
  const bodyTimeoutMs = r.int('webhook-body-timeout-ms', DEFAULT_WEBHOOK_BODY_TIMEOUT_MS, 1, 600_000);
  const minBodyRateBytes = r.int('webhook-min-body-rate-bytes', DEFAULT_WEBHOOK_MIN_BODY_RATE_BYTES, 0, 1_073_741_824);
  const peerDefault = Math.min(maxUnverifiedBytes, Math.max(maxBodyBytes, Math.floor(maxUnverifiedBytes / 4)));
  const maxUnverifiedBytesPerPeer = r.int('webhook-peer-max-unverified', peerDefault, 1024, 4 * 1024 * 1024 * 1024);
  if (maxUnverifiedBytesPerPeer > maxUnverifiedBytes) r.problem('--webhook-peer-max-unverified', `must be at most --webhook-max-unverified-bytes (${maxUnverifiedBytes})`);
  else if (maxUnverifiedBytesPerPeer < maxBodyBytes) r.problem('--webhook-peer-max-unverified', `must be at least --webhook-max-body-bytes (${maxBodyBytes}), or no delivery of the largest size could ever be read`);
  if (maxUnverifiedBytes < maxBodyBytes) {
    r.problem('--webhook-max-unverified-bytes', `must be at least --webhook-max-body-bytes (${maxBodyBytes}), or no delivery of the largest size could ever be read`);
  }
  // A replay inside the tolerance window must still find the id remembered: twice the window, at least.
  if (dedupRetentionMs < 2 * toleranceS * 1000) {
    r.problem('--webhook-dedup-retention-ms', `must be at least twice --webhook-tolerance-s (${2 * toleranceS * 1000} ms): a delivery replayed inside the window would otherwise reach the app twice`);
  }
  const queue = readQueue(r, forwardTimeoutMs);

  if (!routed) {
    if (ignore.length > 0) r.problem('--app-webhook-ignore', 'needs --app-webhook-url or --app-webhook-route (the ingress is off without them)');
    if (secrets || requiredHeader) {
      r.problem('--app-webhook-url', 'is required when webhook secrets or a required header are set (the ingress is off without it, or without --app-webhook-route)');
    }
    return null;
  }
  if (!secrets && !r.problems.some((p) => p.startsWith('--webhook-secret'))) {
    r.problem('--webhook-secret', 'one of --webhook-secret or --webhook-secret-file is required with --app-webhook-url or --app-webhook-route');
  }
  if (!secrets) return null;
  return {
    appUrl,
    routes,
    ignore,
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
    maxUnverifiedBytesPerPeer,
    bodyTimeoutMs,
    minBodyRateBytes,
    ...queue,
  };
}


/**
 * Resolves `--webhook-max-body-bytes` alone, for `webhook dead-letters`: no dead letter larger than
 * such a body stored is read.
 * @throws ConfigError naming the flag.
 */
export function resolveWebhookMaxBodyBytes(flags: RawFlags, env: RawEnv = process.env): number {
  const r = new Reader(flags, env);
  const maxBodyBytes = r.int('webhook-max-body-bytes', DEFAULT_WEBHOOK_MAX_BODY_BYTES, 1024, 64 * 1024 * 1024);
  if (r.problems.length > 0) throw new ConfigError(r.problems);
  return maxBodyBytes;
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

