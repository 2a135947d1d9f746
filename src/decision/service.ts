import { performance } from 'node:perf_hooks';
import type { CacheConfig } from '../config/index.js';
import { cacheKey, type AllowCache } from './allow-cache.js';
import { deathOf } from './cache-death.js';
import { decisionAnswer } from './answers.js';
import type { CircuitBreaker } from './breaker.js';
import { DecisionError, isServiceFailure, type DecisionErrorCode } from './errors.js';
import type { DecisionMetrics, UpstreamOutcome } from './metrics.js';
import { parseCheckResponse, type UpstreamResponse } from './parse-response.js';
import type { PreEvaluationLog } from './pre-evaluation-log.js';
import type { CacheTrust } from './cache-trust.js';
import type { RequestTrace, UpstreamCallTrace } from '../lib/trace.js';
import type { Answer, CheckRequest } from './types.js';

/** What the service needs from an upstream client (the undici one, in production). */
export interface CheckTransport {
  /**
   * `traceHeaders`: W3C trace context name/value pairs to send with the call. Rejects with
   * `ERR_OVERLOADED` when the check was never sent (it could not be in time), which the breaker
   * does not count, nor an `ERR_UPSTREAM_TIMEOUT` marked {@link DecisionError.sentLate} (sent with
   * too little of its deadline left for the service to be blamed).
   */
  check(body: string, traceHeaders?: readonly string[]): Promise<UpstreamResponse>;
  /** The whole deadline of one check (ms), when it has one: a request never waits longer than it for its answer. */
  readonly timeoutMs?: number;
}

/** How {@link DecisionService.decide} treats the cache, and the request's trace. */
export interface DecideOptions {
  /**
   * Skip the cache (`Cache-Control: no-cache`): not read, only refreshed, and only a call that
   * started after the request arrived is joined (see {@link DecisionService.decide}).
   */
  readonly noCache?: boolean;
  /**
   * When the request arrived (`performance.now()` ms; now when absent): a `noCache` request joins a
   * call for its key that started at or after it.
   */
  readonly arrivedAt?: number;
  /** The caller just found no live entry: do not read the cache again. */
  readonly cacheMissed?: boolean;
  readonly trace?: RequestTrace | null;
}

export interface DecisionServiceOptions {
  readonly transport: CheckTransport;
  readonly cache: AllowCache;
  readonly cacheConfig: CacheConfig;
  readonly breaker: CircuitBreaker;
  readonly metrics: DecisionMetrics;
  readonly preEvaluationLog: PreEvaluationLog;
  /** Upstream calls at once before misses are shed with `ERR_OVERLOADED`. */
  readonly maxInFlight: number;
  /**
   * Read before every hit: while it says the cache cannot be trusted (the fleet's invalidation log
   * went unread too long), nothing is served from the cache and every check asks the service. Always
   * trusted when absent.
   */
  readonly trust?: Pick<CacheTrust, 'trusted'>;
  readonly now?: () => number;
}

const ALWAYS_TRUSTED: Pick<CacheTrust, 'trusted'> = Object.freeze({ trusted: true });

const OUTCOME_BY_CODE: Record<DecisionErrorCode, UpstreamOutcome> = {
  ERR_UPSTREAM_TIMEOUT: 'timeout',
  ERR_UPSTREAM_NETWORK: 'network_error',
  ERR_UPSTREAM_STATUS_5XX: 'http_5xx',
  ERR_UPSTREAM_STATUS_4XX: 'http_4xx',
  ERR_UPSTREAM_STATUS_OTHER: 'http_other',
  ERR_UPSTREAM_MALFORMED: 'invalid_response',
  ERR_UPSTREAM_CONTRADICTORY: 'invalid_response',
  ERR_UPSTREAM_EXPIRED: 'invalid_response',
  ERR_CIRCUIT_OPEN: 'network_error',
  ERR_OVERLOADED: 'network_error',
};

interface Flight {
  readonly generation: number;
  readonly promise: Promise<Answer>;
  /** The traced call, so a request that joins it can link to it (null when untraced). */
  readonly call: { readonly current: UpstreamCallTrace | null };
}

/** The flight's call holder when the request is not traced: read by joiners (null), never written. */
const UNTRACED_CALL: { readonly current: UpstreamCallTrace | null } = Object.freeze({ current: null });

/**
 * The newest `no-cache` call of one key: when it started, and the call that starts when it ends,
 * shared by every `no-cache` request for the key that arrived while it ran (it started before them).
 */
interface FreshFlight {
  readonly startedAt: number;
  readonly generation: number;
  readonly promise: Promise<Answer>;
  readonly call: { readonly current: UpstreamCallTrace | null };
  next: Promise<Answer> | null;
}

const ignore = (): void => undefined;

/** Calls in flight for one key, and the newest call sequence a fresh denial has overruled. */
interface KeyCalls {
  inFlight: number;
  deniedThrough: number;
}

/**
 * Decides one check: the cache when it holds a live ALLOW, else one upstream call per key at a
 * time (concurrent misses join it), parsed by the fail-closed parser. It returns only answers
 * built from a well-formed service decision; every other outcome is thrown as a
 * {@link DecisionError} for the HTTP boundary to turn into a 503 DENY.
 */
export class DecisionService {
  private readonly flights = new Map<string, Flight>();
  /** Keys with a `no-cache` call in flight or about to start, so it stays as small as the concurrency. */
  private readonly freshFlights = new Map<string, FreshFlight>();
  /** Only keys with a call in flight, so it stays as small as the concurrency. */
  private readonly calls = new Map<string, KeyCalls>();
  private callSeq = 0;
  private inFlight = 0;
  private readonly now: () => number;
  private readonly trust: Pick<CacheTrust, 'trusted'>;

  constructor(private readonly o: DecisionServiceOptions) {
    this.now = o.now ?? Date.now;
    this.trust = o.trust ?? ALWAYS_TRUSTED;
  }

  /**
   * The live cached answer for this request, synchronously, or undefined. A hit inside the
   * refresh-ahead window starts a background refresh of the entry (once per entry).
   */
  cached(req: CheckRequest): Answer | undefined {
    if (!this.trust.trusted) return undefined;
    const key = cacheKey(req);
    const hit = this.o.cache.lookup(key);
    if (hit === undefined) return undefined;
    if (hit.refreshDue) this.refresh(req, key);
    return hit.answer;
  }

  /**
   * Refresh-ahead (contract, the ALLOW cache): the entry for `key` is asked again in the
   * background, coalesced with any miss (it is the key's flight while it runs, and a flight
   * already running is the refresh). A new ALLOW replaces the entry with its own death; a DENY
   * removes it at once (ask() does both); no decision leaves it to die when it would have. Never
   * answers anyone: its outcome is counted.
   */
  private refresh(req: CheckRequest, key: string): void {
    const generation = this.o.cache.generation;
    const flight = this.flights.get(key);
    if (flight && flight.generation === generation) {
      this.o.metrics.refreshed('coalesced');
      return;
    }
    const call = UNTRACED_CALL;
    const promise = this.ask(req, key, generation, null, call);
    const mine: Flight = { generation, promise, call };
    this.flights.set(key, mine);
    promise.then(
      (answer) => this.o.metrics.refreshed(answer.decision === 'allow' ? 'allow' : 'deny'),
      () => this.o.metrics.refreshed('no_decision'),
    );
    const forget = (): void => {
      if (this.flights.get(key) === mine) this.flights.delete(key);
    };
    promise.then(forget, forget);
  }

  /**
   * A decision for `req`. Options: `noCache`, the cache is not read, only refreshed, and the answer
   * comes from a call that started after the request arrived (`arrivedAt`): the key's `no-cache`
   * call if it did, else the one call that starts when that one ends, shared by every `no-cache`
   * request for the key that arrived meanwhile (so one key's burst is at most one call at a time,
   * not one per request); `cacheMissed`, the caller has just read the cache ({@link cached}) and found
   * nothing, so it is not read again (a flight in progress is still joined); `trace`, the
   * request's trace, when it has one (its call to the service carries it).
   * @throws DecisionError when no decision could be had.
   */
  decide(req: CheckRequest, options: DecideOptions = {}): Promise<Answer> {
    const { noCache = false, cacheMissed = false, trace = null, arrivedAt } = options;
    const key = cacheKey(req);
    if (!noCache && !cacheMissed && this.trust.trusted) {
      const hit = this.o.cache.lookup(key);
      if (hit) {
        if (hit.refreshDue) this.refresh(req, key);
        return Promise.resolve(hit.answer);
      }
    }
    const generation = this.o.cache.generation;
    if (noCache) return this.decideFresh(req, key, arrivedAt ?? performance.now(), trace);

    const flight = this.flights.get(key);
    // A flight that started before a purge may carry a revoked ALLOW: never join it.
    if (flight && flight.generation === generation) {
      this.o.metrics.coalesced.inc();
      if (trace !== null && flight.call.current !== null) trace.joined(flight.call.current);
      return flight.promise;
    }
    // Untraced (the default): one shared holder that ask() never writes, no object per miss.
    const call = trace === null ? UNTRACED_CALL : { current: null };
    const promise = this.ask(req, key, generation, trace, call);
    const mine: Flight = { generation, promise, call };
    this.flights.set(key, mine);
    const forget = (): void => {
      if (this.flights.get(key) === mine) this.flights.delete(key);
    };
    promise.then(forget, forget);
    return promise;
  }

  /** A `no-cache` decision: only from a call that started at or after `arrivedAt`. */
  private decideFresh(req: CheckRequest, key: string, arrivedAt: number, trace: RequestTrace | null): Promise<Answer> {
    const flight = this.freshFlights.get(key);
    if (flight === undefined) return this.startFresh(req, key, trace);
    if (flight.startedAt >= arrivedAt && flight.generation === this.o.cache.generation) {
      this.o.metrics.coalesced.inc();
      if (trace !== null && flight.call.current !== null) trace.joined(flight.call.current);
      return flight.promise;
    }
    if (flight.next !== null) {
      this.o.metrics.coalesced.inc();
      return this.byDeadline(flight.next, arrivedAt);
    }
    // The call under way started before this request (or before a purge): the next one, started
    // when it ends, is fresh for this request and for every one that arrives until then.
    const next = flight.promise.then(ignore, ignore).then(() => this.startFresh(req, key, trace));
    flight.next = next;
    return this.byDeadline(next, arrivedAt);
  }

  /**
   * `answer`, or `upstream_timeout` once the request's own deadline (the transport's, from
   * `arrivedAt`) has passed: a request that waits for the call under way and then the one after it
   * would otherwise wait up to two deadlines, past what the app and Envoy were told a check takes.
   */
  private byDeadline(answer: Promise<Answer>, arrivedAt: number): Promise<Answer> {
    const timeoutMs = this.o.transport.timeoutMs;
    if (timeoutMs === undefined) return answer;
    return new Promise<Answer>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new DecisionError('ERR_UPSTREAM_TIMEOUT', `no fresh answer within the ${timeoutMs} ms deadline: it waited for the call under way when it arrived, then for the one after it`)),
        Math.max(0, arrivedAt + timeoutMs - performance.now()),
      );
      answer.then(
        (a) => {
          clearTimeout(timer);
          resolve(a);
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(err);
        },
      );
    });
  }

  private startFresh(req: CheckRequest, key: string, trace: RequestTrace | null): Promise<Answer> {
    const generation = this.o.cache.generation;
    // Taken before the call is sent: a request that arrived by then is answered by what the service says after.
    const startedAt = performance.now();
    const call = trace === null ? UNTRACED_CALL : { current: null };
    const promise = this.ask(req, key, generation, trace, call);
    const mine: FreshFlight = { startedAt, generation, promise, call, next: null };
    this.freshFlights.set(key, mine);
    // Kept while a call is to follow it: that one takes its place when it starts.
    const forget = (): void => {
      if (this.freshFlights.get(key) === mine && mine.next === null) this.freshFlights.delete(key);
    };
    promise.then(forget, forget);
    return promise;
  }

  /** `call.current` is set to the traced call while it runs (for requests that join it). */
  private async ask(req: CheckRequest, key: string, generation: number, trace: RequestTrace | null, call: { readonly current: UpstreamCallTrace | null }): Promise<Answer> {
    if (this.inFlight >= this.o.maxInFlight) {
      throw new DecisionError('ERR_OVERLOADED', `${this.inFlight} checks already waiting on the service`);
    }
    const ticket = this.o.breaker.tryAcquire();
    if (!ticket) throw new DecisionError('ERR_CIRCUIT_OPEN', 'circuit breaker open');

    this.inFlight++;
    const seq = ++this.callSeq;
    let calls = this.calls.get(key);
    if (!calls) this.calls.set(key, (calls = { inFlight: 0, deniedThrough: 0 }));
    calls.inFlight++;
    const started = performance.now();
    // Only a traced request has its own holder (UNTRACED_CALL is never written).
    const traced = trace === null ? null : ((call as { current: UpstreamCallTrace | null }).current = trace.upstreamCall());
    let parsed;
    try {
      const res = await this.o.transport.check(JSON.stringify({ userReference: req.userReference, configKey: req.configKey }), traced?.headers);
      // Asked with the cache's own copy of the configKey when it holds one: the ALLOW keeps the
      // string it was asked with, and a million entries of one configKey then share one.
      parsed = parseCheckResponse(res, this.o.cache.sharedConfigKey(req.configKey), this.now());
    } catch (err) {
      if (err instanceof DecisionError && err.code === 'ERR_OVERLOADED') {
        // Never sent: not a call to the service, and nothing it did.
        traced?.end('overload');
        this.o.breaker.release(ticket);
        throw err;
      }
      const code = err instanceof DecisionError ? err.code : 'ERR_UPSTREAM_NETWORK';
      this.o.metrics.upstreamCall(OUTCOME_BY_CODE[code], (performance.now() - started) / 1000);
      traced?.end(OUTCOME_BY_CODE[code]);
      if (err instanceof DecisionError && err.sentLate) {
        // A timeout of a check sent late (it waited in the sidecar for a connection first): the
        // service never had a fair budget, so, like an overload, it is neither a failure nor a sign
        // of life, and a probe's turn goes to the next check. The app still gets `upstream_timeout`.
        this.o.breaker.release(ticket);
      } else if (isServiceFailure(err) || !(err instanceof DecisionError)) this.o.breaker.failure(ticket);
      else this.o.breaker.neutral(ticket);
      throw err;
    } finally {
      this.inFlight--;
      if (--calls.inFlight === 0) this.calls.delete(key);
    }
    this.o.metrics.upstreamCall('ok', (performance.now() - started) / 1000);
    traced?.end('ok');
    this.o.breaker.success(ticket);

    const d = parsed.decision;
    if (d.kind === 'allow') {
      // An ALLOW from a call that started before a fresh denial for this key was seen is older
      // news than that denial: answer it (it was asked earlier) but never cache it.
      if (seq > calls.deniedThrough) {
        const diesAt = deathOf(d.validUntil, this.now(), parsed.serviceNowMs, this.o.cacheConfig);
        this.o.cache.setAllow(key, req.userReference, d, diesAt, generation);
      }
      return decisionAnswer(d, 'upstream');
    }
    // A fresh denial makes any cached ALLOW for this request stale, overrules every call for it
    // still in flight, and closes the flight later requests could join.
    this.o.cache.delete(key);
    calls.deniedThrough = this.callSeq;
    this.flights.delete(key);
    if (d.kind === 'pre_evaluation_denial') {
      this.o.metrics.preEvaluationDenial(d.reason);
      this.o.preEvaluationLog.record(d.reason, req.configKey);
    }
    return decisionAnswer(d, 'upstream');
  }
}
