import { SidecarConnection, unavailable, type SidecarAddress } from './exchange.js';
import { readBatchAnswer, readCheckAnswer } from './read-answer.js';
import type { CallOptions, CheckInput, CheckResult, ClientCause, NotAllowed } from './types.js';

/** Default whole deadline of one call (ms): a little more than the sidecar's own 2000 ms upstream deadline. */
export const DEFAULT_TIMEOUT_MS = 3000;
/** Default cap on a check answer's body (bytes); a decision is under 7 KB even with the longest configKey. */
export const DEFAULT_MAX_BODY_BYTES = 65_536;
/** Default cap on a batch answer's body (bytes). */
export const DEFAULT_MAX_BATCH_BODY_BYTES = 4 * 1_048_576;
/** Most checks in one batch, as the sidecar accepts them. */
export const MAX_BATCH_CHECKS = 100;
/** Longest `userReference` / `configKey` the sidecar accepts (UTF-16 units). */
export const MAX_FIELD_LENGTH = 1024;

const CHECK_PATH = '/v1/authorization/check';
const BATCH_PATH = '/sidecar/authorization/check-batch';

export interface ConsentClientOptions {
  /** `http://127.0.0.1:7700` (the sidecar's decision listener), or `unix:/path/to.sock` (`--listen unix:…`). */
  readonly baseUrl: string;
  /** Whole deadline of one call (ms), connecting and reading the body included; default {@link DEFAULT_TIMEOUT_MS}. */
  readonly timeoutMs?: number;
  /** A check answer larger than this (bytes) is not read; default {@link DEFAULT_MAX_BODY_BYTES}. */
  readonly maxBodyBytes?: number;
  /** A batch answer larger than this (bytes) is not read; default {@link DEFAULT_MAX_BATCH_BODY_BYTES}. */
  readonly maxBatchBodyBytes?: number;
  /** Kept-alive connections to the sidecar at most; default 16. */
  readonly connections?: number;
  /** The clock an ALLOW's `validUntil` is held to (epoch ms); default `Date.now`. */
  readonly now?: () => number;
}

/**
 * The application's client of the sidecar's decision API. Its only way to say allowed is a 200
 * whose body is a well-formed ALLOW for exactly the configKey asked, with a `validUntil` in the
 * future when it arrived; every other outcome is a {@link NotAllowed} with its kind and cause.
 * It throws only at construction, for bad options; never for an answer or a failure to get one.
 * Connections are kept alive (node's own `http`: the package has no dependencies), over TCP or a
 * Unix socket; redirects are never followed.
 *
 * @example
 * import { ConsentClient, holdsAt } from '@consent-sidecar/client'; // or 'consent-sidecar/client'
 * const consent = new ConsentClient({ baseUrl: process.env.CONSENT_SIDECAR_URL ?? 'http://127.0.0.1:7700' });
 * const r = await consent.check({ userReference: 'alice', configKey: 'marketing-email' });
 * if (r.allowed) sendTheEmail();            // right now; later, ask holdsAt(r, Date.now()) or check again
 * else log.info({ kind: r.kind, cause: r.cause, decisionId: r.decisionId }, 'not allowed');
 * await consent.close();
 */
export class ConsentClient {
  private readonly connection: SidecarConnection;
  private readonly timeoutMs: number;
  private readonly maxBodyBytes: number;
  private readonly maxBatchBodyBytes: number;
  private readonly now: () => number;

  constructor(options: ConsentClientOptions) {
    const o = options as Partial<ConsentClientOptions> | undefined;
    if (typeof o?.baseUrl !== 'string') throw new TypeError('ConsentClient: baseUrl must be a string (http://host:port or unix:/path)');
    this.timeoutMs = positive(o.timeoutMs, DEFAULT_TIMEOUT_MS, 'timeoutMs');
    this.maxBodyBytes = positive(o.maxBodyBytes, DEFAULT_MAX_BODY_BYTES, 'maxBodyBytes');
    this.maxBatchBodyBytes = positive(o.maxBatchBodyBytes, DEFAULT_MAX_BATCH_BODY_BYTES, 'maxBatchBodyBytes');
    const connections = positive(o.connections, 16, 'connections');
    if (o.now !== undefined && typeof o.now !== 'function') throw new TypeError('ConsentClient: now must be a function');
    this.now = o.now ?? Date.now;
    this.connection = new SidecarConnection(addressOf(o.baseUrl), connections);
  }

  /**
   * One decision. Resolves with an {@link Allowed} only for a verified, unambiguous, matching,
   * unexpired ALLOW; never rejects.
   *
   * @example
   * const r = await consent.check({ userReference: 'alice', configKey: 'marketing-email' }, { timeoutMs: 500 });
   */
  async check(input: CheckInput, options: CallOptions = {}): Promise<CheckResult> {
    try {
      const bad = invalidInput(input);
      if (bad) return refused(bad);
      const timeoutMs = this.callTimeout(options);
      if (timeoutMs === undefined) return refused('timeoutMs must be a positive number of ms');
      const raw = await this.connection.post(CHECK_PATH, JSON.stringify({ userReference: input.userReference, configKey: input.configKey }), this.maxBodyBytes, timeoutMs, options);
      return 'allowed' in raw ? raw : readCheckAnswer(raw, input, this.now());
    } catch (err) {
      return internal(err);
    }
  }

  /**
   * Up to {@link MAX_BATCH_CHECKS} decisions in one request, one result per check in order, each
   * read as strictly as {@link check}'s (an item for another configKey than asked, a missing or
   * malformed item, or a results array of the wrong length: not allowed). Never rejects.
   *
   * @example
   * const [email, sms] = await consent.checkBatch([
   *   { userReference: 'alice', configKey: 'marketing-email' },
   *   { userReference: 'alice', configKey: 'marketing-sms' },
   * ]);
   */
  async checkBatch(checks: readonly CheckInput[], options: CallOptions = {}): Promise<CheckResult[]> {
    try {
      if (!Array.isArray(checks)) return [];
      if (checks.length === 0) return [];
      if (checks.length > MAX_BATCH_CHECKS) return checks.map(() => refused(`more than ${MAX_BATCH_CHECKS} checks`, 'batch_too_large'));
      const problems = checks.map((c) => invalidInput(c));
      // The sidecar refuses a whole batch for one bad item: so does the client, before sending it.
      if (problems.some((p) => p !== undefined)) return problems.map((p) => refused(p ?? 'another check of the batch was refused'));
      const timeoutMs = this.callTimeout(options);
      if (timeoutMs === undefined) return checks.map(() => refused('timeoutMs must be a positive number of ms'));
      const body = JSON.stringify({ checks: checks.map((c) => ({ userReference: c.userReference, configKey: c.configKey })) });
      const raw = await this.connection.post(BATCH_PATH, body, this.maxBatchBodyBytes, timeoutMs, options);
      return 'allowed' in raw ? checks.map(() => raw) : readBatchAnswer(raw, checks, this.now());
    } catch (err) {
      return Array.isArray(checks) ? checks.map(() => internal(err)) : [];
    }
  }

  /** Closes the kept-alive connections once the calls in flight are done; later calls are `unavailable`/`closed`. */
  close(): Promise<void> {
    return this.connection.close();
  }

  /** The call's whole deadline (ms): its own, or the client's; undefined when the call's is not a positive number. */
  private callTimeout(options: CallOptions): number | undefined {
    const timeoutMs = options.timeoutMs === undefined ? this.timeoutMs : options.timeoutMs;
    return Number.isFinite(timeoutMs) && timeoutMs > 0 ? timeoutMs : undefined;
  }
}

/** `http://host:port` or `unix:/absolute/path`, checked once; anything else throws (misuse). */
function addressOf(baseUrl: string): SidecarAddress {
  if (baseUrl.startsWith('unix:')) {
    const socketPath = baseUrl.slice('unix:'.length);
    if (!socketPath.startsWith('/')) throw new TypeError(`ConsentClient: baseUrl ${baseUrl}: a socket is unix:/absolute/path`);
    return { socketPath };
  }
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    throw new TypeError(`ConsentClient: baseUrl ${baseUrl} is not a URL`);
  }
  if (url.protocol !== 'http:' || (url.pathname !== '/' && url.pathname !== '') || url.search !== '' || url.username !== '') {
    throw new TypeError(`ConsentClient: baseUrl ${baseUrl}: expected http://host:port (or unix:/path)`);
  }
  return { host: url.hostname.replace(/^\[(.*)\]$/, '$1'), port: url.port === '' ? 80 : Number(url.port) };
}

function positive(v: unknown, fallback: number, name: string): number {
  if (v === undefined) return fallback;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v <= 0) throw new RangeError(`ConsentClient: ${name} must be a positive integer, got ${String(v)}`);
  return v;
}

/** What is wrong with one check's input, or undefined. Never names the user reference. */
function invalidInput(c: unknown): string | undefined {
  if (typeof c !== 'object' || c === null) return 'a check is {userReference, configKey}';
  const { userReference, configKey } = c as Record<string, unknown>;
  for (const [name, v] of [['userReference', userReference], ['configKey', configKey]] as const) {
    if (typeof v !== 'string' || v.length === 0) return `${name} must be a non-empty string`;
    if (v.length > MAX_FIELD_LENGTH) return `${name} is longer than ${MAX_FIELD_LENGTH} characters`;
  }
  return undefined;
}

function refused(detail: string, cause: ClientCause = 'invalid_argument'): NotAllowed {
  return Object.freeze({ allowed: false, kind: 'invalid_request', cause, detail });
}

function internal(err: unknown): NotAllowed {
  return unavailable('internal_error', err instanceof Error ? err.message.slice(0, 200) : 'unknown');
}
