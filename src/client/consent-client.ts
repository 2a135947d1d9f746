import { Pool } from 'undici';
import { readBatchAnswer, readCheckAnswer, type RawAnswer } from './read-answer.js';
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

type Raw = RawAnswer | NotAllowed;

/**
 * The application's client of the sidecar's decision API. Its only way to say allowed is a 200
 * whose body is a well-formed ALLOW for exactly the configKey asked, with a `validUntil` in the
 * future when it arrived; every other outcome is a {@link NotAllowed} with its kind and cause.
 * It throws only at construction, for bad options; never for an answer or a failure to get one.
 * Connections are kept alive, over TCP or a Unix socket; redirects are never followed.
 *
 * @example
 * import { ConsentClient, holdsAt } from 'consent-sidecar/client';
 * const consent = new ConsentClient({ baseUrl: process.env.CONSENT_SIDECAR_URL ?? 'http://127.0.0.1:7700' });
 * const r = await consent.check({ userReference: 'alice', configKey: 'marketing-email' });
 * if (r.allowed) sendTheEmail();            // right now; later, ask holdsAt(r, Date.now()) or check again
 * else log.info({ kind: r.kind, cause: r.cause, decisionId: r.decisionId }, 'not allowed');
 * await consent.close();
 */
export class ConsentClient {
  private readonly pool: Pool;
  private readonly timeoutMs: number;
  private readonly maxBodyBytes: number;
  private readonly maxBatchBodyBytes: number;
  private readonly now: () => number;
  private closed = false;

  constructor(options: ConsentClientOptions) {
    const o = options as Partial<ConsentClientOptions> | undefined;
    if (typeof o?.baseUrl !== 'string') throw new TypeError('ConsentClient: baseUrl must be a string (http://host:port or unix:/path)');
    this.timeoutMs = positive(o.timeoutMs, DEFAULT_TIMEOUT_MS, 'timeoutMs');
    this.maxBodyBytes = positive(o.maxBodyBytes, DEFAULT_MAX_BODY_BYTES, 'maxBodyBytes');
    this.maxBatchBodyBytes = positive(o.maxBatchBodyBytes, DEFAULT_MAX_BATCH_BODY_BYTES, 'maxBatchBodyBytes');
    const connections = positive(o.connections, 16, 'connections');
    if (o.now !== undefined && typeof o.now !== 'function') throw new TypeError('ConsentClient: now must be a function');
    this.now = o.now ?? Date.now;
    // Shorter than the sidecar's own keep-alive (65 s), so the client, not the server, retires an idle connection.
    const common = { connections, keepAliveTimeout: 30_000, keepAliveMaxTimeout: 30_000, pipelining: 1 };
    if (o.baseUrl.startsWith('unix:')) {
      const socketPath = o.baseUrl.slice('unix:'.length);
      if (!socketPath.startsWith('/')) throw new TypeError(`ConsentClient: baseUrl ${o.baseUrl}: a socket is unix:/absolute/path`);
      this.pool = new Pool('http://localhost', { ...common, socketPath });
    } else {
      let url: URL;
      try {
        url = new URL(o.baseUrl);
      } catch {
        throw new TypeError(`ConsentClient: baseUrl ${o.baseUrl} is not a URL`);
      }
      if (url.protocol !== 'http:' || (url.pathname !== '/' && url.pathname !== '') || url.search !== '' || url.username !== '') {
        throw new TypeError(`ConsentClient: baseUrl ${o.baseUrl}: expected http://host:port (or unix:/path)`);
      }
      this.pool = new Pool(url.origin, common);
    }
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
      const raw = await this.exchange(CHECK_PATH, JSON.stringify({ userReference: input.userReference, configKey: input.configKey }), this.maxBodyBytes, options);
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
      const body = JSON.stringify({ checks: checks.map((c) => ({ userReference: c.userReference, configKey: c.configKey })) });
      const raw = await this.exchange(BATCH_PATH, body, this.maxBatchBodyBytes, options);
      return 'allowed' in raw ? checks.map(() => raw) : readBatchAnswer(raw, checks, this.now());
    } catch (err) {
      return Array.isArray(checks) ? checks.map(() => internal(err)) : [];
    }
  }

  /** Closes the kept-alive connections once the calls in flight are done; later calls are `unavailable`/`closed`. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool.close();
  }

  /**
   * POSTs `body` and reads the whole answer under one deadline and a size cap. A connection that
   * failed before any answer came is tried once more within the deadline (a kept-alive
   * connection the sidecar closed as it was reused); nothing that answered is ever retried.
   */
  private async exchange(path: string, body: string, cap: number, options: CallOptions): Promise<Raw> {
    if (this.closed) return unavailable('closed');
    const timeoutMs = options.timeoutMs === undefined ? this.timeoutMs : options.timeoutMs;
    if (!(Number.isFinite(timeoutMs) && timeoutMs > 0)) return refused('timeoutMs must be a positive number of ms');
    const deadline = AbortSignal.timeout(timeoutMs);
    const signal = options.signal ? AbortSignal.any([options.signal, deadline]) : deadline;
    const stopped = (): NotAllowed | undefined => (options.signal?.aborted ? unavailable('aborted') : deadline.aborted ? unavailable('timeout') : undefined);
    for (let attempt = 1; ; attempt++) {
      const early = stopped();
      if (early) return early;
      let res;
      try {
        res = await this.pool.request({ method: 'POST', path, headers: { 'content-type': 'application/json', accept: 'application/json' }, body, signal });
      } catch (err) {
        const why = stopped() ?? transportFailure(err);
        if (why.cause === 'connection_reset' && attempt === 1) continue;
        return why;
      }
      return await this.readBody(res, cap, stopped);
    }
  }

  private async readBody(res: Awaited<ReturnType<Pool['request']>>, cap: number, stopped: () => NotAllowed | undefined): Promise<Raw> {
    const declared = Number(res.headers['content-length']);
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      if (declared > cap) {
        res.body.destroy();
        return { allowed: false, kind: 'unexpected_answer', cause: 'body_too_large', status: res.statusCode };
      }
      for await (const chunk of res.body) {
        size += (chunk as Buffer).length;
        if (size > cap) {
          res.body.destroy();
          return { allowed: false, kind: 'unexpected_answer', cause: 'body_too_large', status: res.statusCode };
        }
        chunks.push(chunk as Buffer);
      }
    } catch {
      return stopped() ?? unavailable('incomplete_body');
    }
    const id = res.headers['x-consent-decision-id'];
    const type = res.headers['content-type'];
    const source = res.headers['x-consent-decision-source'];
    return {
      status: res.statusCode,
      contentType: typeof type === 'string' ? type : undefined,
      body: Buffer.concat(chunks, size),
      decisionId: typeof id === 'string' ? id : undefined,
      source: typeof source === 'string' ? source : undefined,
    };
  }
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

function unavailable(cause: ClientCause, detail?: string): NotAllowed {
  return Object.freeze({ allowed: false, kind: 'unavailable', cause, ...(detail === undefined ? {} : { detail }) });
}

function internal(err: unknown): NotAllowed {
  return unavailable('internal_error', err instanceof Error ? err.message.slice(0, 200) : 'unknown');
}

const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOENT', 'EACCES', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL', 'UND_ERR_CONNECT_TIMEOUT', 'ENOTSOCK']);

/** A failure before any answer: the sidecar not there, the connection cut, or bytes that are not HTTP. */
function transportFailure(err: unknown): NotAllowed {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && UNREACHABLE.has(code)) return unavailable('unreachable', code);
  if (typeof code === 'string' && code.startsWith('HPE_')) return Object.freeze({ allowed: false, kind: 'unexpected_answer', cause: 'malformed', detail: `not HTTP (${code})` });
  return unavailable('connection_reset', typeof code === 'string' ? code : undefined);
}
