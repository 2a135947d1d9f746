import { Gauge, type Registry } from '../observability/prom.js';
import { request } from '../lib/undici.js';
import type { UpstreamConfig } from '../config/index.js';
import { METRIC_PREFIX, type Logger } from '../observability/index.js';

/**
 * What one probe tells about the API key:
 * - `rejected`: the service answered 401 or 403 to an authenticated check: the key is wrong,
 *   revoked, or lacks the one permission the sidecar needs;
 * - `unreachable`: no answer about the key (network error, timeout, 5xx, 408, 429);
 * - `accepted`: any other answer (2xx, or a 4xx other than those) went past authentication.
 */
export type KeyProbeOutcome = 'accepted' | 'rejected' | 'unreachable';

/** First wait before probing again after a rejection or no answer (ms); doubled each time. */
export const DEFAULT_KEY_PROBE_FIRST_RETRY_MS = 1000;
/** Longest wait between two probes (ms): a key fixed in its Secret file is seen within this long. */
export const DEFAULT_KEY_PROBE_MAX_RETRY_MS = 60_000;

/**
 * The probe is a real check, the one call every tenant's key must be allowed to make, for a
 * reference and configKey no tenant has: a valid key gets a pre-evaluation DENY (200), a wrong one
 * 401/403. (The REDEC listing would be cheaper but is a permission of its own: a valid key of a
 * tenant without REDEC may get 403 there, which would be a false alarm.)
 */
export const KEY_PROBE_BODY = JSON.stringify({ userReference: 'consent-sidecar-key-probe', configKey: 'consent-sidecar-key-probe' });

/** `consent_sidecar_upstream_api_key_rejected`: 1 while the last answer about the key was a rejection. */
export function createUpstreamKeyMetrics(registry: Registry): { rejected: Gauge } {
  return {
    rejected: new Gauge({
      name: `${METRIC_PREFIX}upstream_api_key_rejected`,
      help: 'Whether the consent service rejected the API key (401/403) at the last start-up probe: 1 rejected, 0 not (or not known yet)',
      registers: [registry],
    }),
  };
}

/** Classifies one HTTP status of the probe. */
export function classifyKeyProbeStatus(status: number): KeyProbeOutcome {
  if (status === 401 || status === 403) return 'rejected';
  if (status >= 500 || status === 408 || status === 429) return 'unreachable';
  return 'accepted';
}

export interface UpstreamKeyProbeOptions {
  readonly upstream: UpstreamConfig;
  readonly logger: Logger;
  readonly registry: Registry;
  /** Wall clock (epoch ms), for the time of the next attempt in the log. */
  readonly now?: () => number;
  /** See {@link DEFAULT_KEY_PROBE_FIRST_RETRY_MS}. */
  readonly firstRetryMs?: number;
  /** See {@link DEFAULT_KEY_PROBE_MAX_RETRY_MS}. */
  readonly maxRetryMs?: number;
}

/**
 * Checks the API key once at start, so a wrong key is an error line naming its flag before the
 * first customer's check fails closed with `upstream_4xx`. Probes again with exponential backoff
 * while the key is rejected or the service gives no answer, and stops at the first answer that went
 * past authentication. It never touches readiness: decisions fail closed either way. Logs name the
 * flag the key came from (`--api-key`, `--api-key-file (path)`), never the key.
 */
export class UpstreamKeyProbe {
  private readonly metrics: { rejected: Gauge };
  private readonly controller = new AbortController();
  private readonly now: () => number;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private attempts = 0;
  private closed = false;
  private last: KeyProbeOutcome | undefined;

  constructor(private readonly options: UpstreamKeyProbeOptions) {
    this.metrics = createUpstreamKeyMetrics(options.registry);
    this.metrics.rejected.set(0);
    this.now = options.now ?? Date.now;
  }

  /** The last outcome, or undefined before the first answer. */
  get outcome(): KeyProbeOutcome | undefined {
    return this.last;
  }

  /** Probes now, then again with backoff until the key is accepted or {@link close} is called. */
  start(): void {
    if (this.running || this.closed) return;
    this.running = this.attempt();
  }

  private async attempt(): Promise<void> {
    if (this.closed) return;
    this.attempts += 1;
    const { outcome, detail } = await this.probeOnce();
    if (this.closed) return;
    const previous = this.last;
    this.last = outcome;
    const { logger, upstream } = this.options;
    const flag = upstream.apiKey.origin;
    if (outcome === 'accepted') {
      this.metrics.rejected.set(0);
      logger.info({ event: 'upstream_accepts_api_key', flag, attempt: this.attempts, status: detail }, `the consent service accepts the API key given with ${flag}`);
      return;
    }
    const first = this.options.firstRetryMs ?? DEFAULT_KEY_PROBE_FIRST_RETRY_MS;
    const max = this.options.maxRetryMs ?? DEFAULT_KEY_PROBE_MAX_RETRY_MS;
    const retryInMs = Math.min(max, first * 2 ** Math.min(this.attempts - 1, 30));
    const next = { attempt: this.attempts, retryInMs, nextAttemptAt: this.now() + retryInMs };
    if (outcome === 'rejected') {
      this.metrics.rejected.set(1);
      logger.error(
        { event: 'upstream_rejects_api_key', flag, status: detail, ...next },
        `the consent service rejects the API key given with ${flag} (HTTP ${detail}): every decision that is not cached fails closed (upstream_4xx) until the key is fixed; check ${flag}`,
      );
    } else {
      // Once, and again when the outcome changes: an outage is the breaker's and the alerts' to report.
      const level = previous === 'unreachable' ? 'debug' : 'warn';
      logger[level](
        { event: 'upstream_key_check_unreachable', flag, cause: detail, ...next },
        `could not check the API key given with ${flag}: the consent service gave no answer (${detail}); trying again`,
      );
    }
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.running = this.attempt();
    }, retryInMs);
    this.timer.unref();
  }

  private async probeOnce(): Promise<{ outcome: KeyProbeOutcome; detail: string }> {
    const { upstream } = this.options;
    const url = `${upstream.baseUrl.origin}${upstream.baseUrl.pathname.replace(/\/+$/, '')}/v1/authorization/check`;
    try {
      const res = await request(url, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${upstream.apiKey.current()}`,
          'content-type': 'application/json',
          accept: 'application/json',
          'user-agent': 'consent-sidecar (key check)',
        },
        body: KEY_PROBE_BODY,
        signal: AbortSignal.any([this.controller.signal, AbortSignal.timeout(upstream.timeoutMs)]),
      });
      await res.body.dump().catch(() => undefined);
      return { outcome: classifyKeyProbeStatus(res.statusCode), detail: String(res.statusCode) };
    } catch (err) {
      const e = err as { name?: string; code?: string; cause?: { code?: string } };
      const detail = e.name === 'TimeoutError' ? 'timeout' : (e.code ?? e.cause?.code ?? e.name ?? 'error');
      return { outcome: 'unreachable', detail };
    }
  }

  /** Stops probing; a probe in flight is aborted. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.controller.abort();
    await this.running?.catch(() => undefined);
  }
}

/**
 * Starts the probe when `config.keyCheck` is on (`--api-key-check`); otherwise a handle that does
 * nothing. The composition root calls this once and `close()` on shutdown.
 */
export function startUpstreamKeyProbe(
  config: { readonly upstream: UpstreamConfig & { readonly keyCheck: boolean } },
  deps: { readonly logger: Logger; readonly registry: Registry; readonly now?: () => number },
): { close(): Promise<void> } {
  if (!config.upstream.keyCheck) return { close: async () => undefined };
  const probe = new UpstreamKeyProbe({ upstream: config.upstream, logger: deps.logger.child({ component: 'upstream-key-probe' }), registry: deps.registry, ...(deps.now ? { now: deps.now } : {}) });
  probe.start();
  return probe;
}
