import { Counter, Gauge, type Registry } from '../observability/prom.js';
import { FastCounter, FastHistogram, METRIC_PREFIX } from '../observability/index.js';
import { BREAKER_STATES, type BreakerState } from './breaker.js';
import { FAIL_CLOSED_CAUSES, type FailClosedCause } from './errors.js';
import { PRE_EVALUATION_REASONS } from './types.js';
import type { Answer, DecisionSource } from './types.js';

/** What a refresh-ahead came to (`outcome` label of `consent_sidecar_cache_refreshes_total`). */
export const REFRESH_OUTCOMES = ['allow', 'deny', 'no_decision', 'coalesced'] as const;
export type RefreshOutcome = (typeof REFRESH_OUTCOMES)[number];

/** Outcomes of one upstream check call (`outcome` label of the duration histogram). */
export const UPSTREAM_OUTCOMES = ['ok', 'http_4xx', 'http_5xx', 'http_other', 'invalid_response', 'timeout', 'network_error'] as const;
export type UpstreamOutcome = (typeof UPSTREAM_OUTCOMES)[number];

const SOURCE_LABEL: Record<DecisionSource, string> = {
  cache: 'cache',
  upstream: 'upstream',
  'fail-closed': 'fail_closed',
  rejected: 'rejected',
};

/** Which route of the decision listener gave an answer (`route` label of the decisions counter). */
export const DECISION_ROUTES = ['check', 'batch', 'forward_auth', 'ext_authz_grpc'] as const;
export type DecisionRoute = (typeof DECISION_ROUTES)[number];

type Inc = { inc(n?: number): void };

/** `{ [k]: f(k) }` for every key: label values bound to their series once, at start-up. */
const bind = <K extends string, V>(keys: readonly K[], f: (k: K) => V): Record<K, V> => Object.fromEntries(keys.map((k) => [k, f(k)])) as Record<K, V>;

const SOURCES = Object.keys(SOURCE_LABEL) as DecisionSource[];

/** A counter's series, exported from now on at 0 (prom-client shows a series once it is incremented). */
const atZero = (series: Inc): Inc => {
  series.inc(0);
  return series;
};

/**
 * A source's and a route's position in SOURCES and DECISION_ROUTES, by a switch: on every answer,
 * where a lookup by a key that changes from site to site would be a megamorphic keyed load.
 */
function sourceId(s: DecisionSource): number {
  switch (s) {
    case 'cache':
      return 0;
    case 'upstream':
      return 1;
    case 'fail-closed':
      return 2;
    case 'rejected':
      return 3;
    default:
      throw new Error(`no decision source ${String(s)}`);
  }
}

function routeId(r: DecisionRoute): number {
  switch (r) {
    case 'check':
      return 0;
    case 'batch':
      return 1;
    case 'forward_auth':
      return 2;
    case 'ext_authz_grpc':
      return 3;
    default:
      throw new Error(`no decision route ${String(r)}`);
  }
}

/** decisions_total's series of (decision, source, route) in a flat table: allow first, then deny. */
function decisionSlot(decision: Answer['decision'], source: DecisionSource, route: DecisionRoute): number {
  const d = decision === 'allow' ? 0 : decision === 'deny' ? 1 : -1;
  if (d === -1) throw new Error(`no decision ${String(decision)}`);
  return (d * SOURCES.length + sourceId(source)) * DECISION_ROUTES.length + routeId(route);
}

/**
 * Buckets of `consent_sidecar_decision_duration_seconds` (s): from a cache hit (tens of
 * microseconds) to the upstream deadline.
 */
export const DECISION_DURATION_BUCKETS_S = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/**
 * Every metric of the decision capability, declared against the given registry. Label values
 * come from closed sets and are pre-bound, so the hot path pays one increment and no hashing.
 */
/** A prom-client counter under the fixed prefix, registered in `registry`. */
function counter<L extends string = never>(registry: Registry, name: string, help: string, labelNames: readonly L[] = []): Counter<L> {
  return new Counter<L>({ name: `${METRIC_PREFIX}${name}`, help, labelNames, registers: [registry] });
}

export class DecisionMetrics {
  private readonly decisions: FastCounter;
  /** decisions_total's series index at each {@link decisionSlot}, bound once at start-up. */
  private readonly decisionIndex: number[];
  private readonly preEvaluation = new Map<string, Inc>();
  private readonly failClosed = new Map<FailClosedCause, Inc>();
  private readonly upstreamDuration: FastHistogram<UpstreamOutcome>;
  private readonly breakerState: Gauge<'state'>;
  readonly coalesced: Inc;
  /** `consent_sidecar_cache_refreshes_total`, by outcome (see {@link RefreshOutcome}). */
  private readonly refreshes: Counter<'outcome'>;
  readonly purged: Counter<'trigger'>;
  /** Decision log lines not written (buffer full or destination broken). */
  readonly decisionLogDropped: Counter;
  private readonly decisionDuration: FastHistogram<string>;
  /** decision_duration_seconds' series index by {@link sourceId}. */
  private readonly durationIndex: number[];
  private readonly upstreamIndex: Record<UpstreamOutcome, number>;

  constructor(registry: Registry, cacheSize: () => number) {
    // A fast histogram: it is observed on every answer, cache hits included.
    this.decisionDuration = new FastHistogram(
      `${METRIC_PREFIX}decision_duration_seconds`,
      "The sidecar's own answer time to the application, from request to answer, by source.",
      'source',
      Object.values(SOURCE_LABEL),
      DECISION_DURATION_BUCKETS_S,
      registry,
    );
    this.durationIndex = [];
    for (const source of SOURCES) this.durationIndex[sourceId(source)] = this.decisionDuration.indexOf(SOURCE_LABEL[source]);
    // A fast counter: it is counted on every answer, cache hits included.
    const decisions = ['allow', 'deny'] as const;
    const sources = SOURCES;
    this.decisions = new FastCounter(
      `${METRIC_PREFIX}decisions_total`,
      'Answers given to the application (check, each batch item) or to a proxy (forward_auth, ext_authz_grpc), by decision, source and route.',
      ['decision', 'source', 'route'],
      decisions.flatMap((d) => sources.flatMap((s) => DECISION_ROUTES.map((r) => [d, SOURCE_LABEL[s], r]))),
      registry,
    );
    this.decisionIndex = [];
    for (const d of decisions) for (const s of sources) for (const r of DECISION_ROUTES) this.decisionIndex[decisionSlot(d, s, r)] = this.decisions.indexOf(d, SOURCE_LABEL[s], r);
    // Every reason and every cause is exported at 0 from the start: a dashboard shows 0 on a healthy
    // pod, not "no data", and a rate() sees the first one.
    const pre = counter(registry, 'pre_evaluation_denials_total', 'Denials the service gave before evaluating (tenant configuration or references), by reason.', ['reason']);
    for (const reason of [...PRE_EVALUATION_REASONS, 'other']) this.preEvaluation.set(reason, atZero(pre.labels(reason)));
    const failClosed = counter(registry, 'fail_closed_total', 'Checks answered 503 DENY because no decision could be had, by cause.', ['cause']);
    for (const cause of FAIL_CLOSED_CAUSES) this.failClosed.set(cause, atZero(failClosed.labels(cause)));
    // Observed on every miss: a fast histogram (label bound by index, same exposition).
    this.upstreamDuration = new FastHistogram(
      `${METRIC_PREFIX}upstream_request_duration_seconds`,
      'Duration of authorization checks sent to the service, retries included, by outcome.',
      'outcome',
      UPSTREAM_OUTCOMES,
      [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registry,
    );
    this.upstreamIndex = bind(UPSTREAM_OUTCOMES, (o) => this.upstreamDuration.indexOf(o));
    new Gauge({
      name: `${METRIC_PREFIX}cache_entries`,
      help: 'ALLOW answers held in the cache.',
      registers: [registry],
      collect() {
        this.set(cacheSize());
      },
    });
    this.breakerState = new Gauge({
      name: `${METRIC_PREFIX}circuit_breaker_state`,
      help: 'State of the circuit breaker in front of the service (1 for the current state).',
      labelNames: ['state'],
      registers: [registry],
    });
    this.setBreakerState('closed');
    this.coalesced = counter(registry, 'upstream_coalesced_total', 'Cache misses that joined an upstream call already in flight for the same request.');
    this.refreshes = counter(
      registry,
      'cache_refreshes_total',
      'Refresh-ahead of cached ALLOWs (--cache-refresh-ahead-ms), by outcome: allow (renewed), deny (revoked: removed at once), no_decision (left to die when it would have), coalesced (a call for the key was already in flight).',
      ['outcome'],
    );
    for (const o of REFRESH_OUTCOMES) this.refreshes.labels(o);
    this.decisionLogDropped = counter(registry, 'decision_log_dropped_total', 'Decision log lines dropped because the buffer was full or the destination failed.');
    this.purged = counter(registry, 'cache_purged_entries_total', 'ALLOW entries purged, by trigger (webhook revocation or manual).', ['trigger']);
  }

  /** Counts one background refresh by what it came to. */
  refreshed(outcome: RefreshOutcome): void {
    this.refreshes.labels(outcome).inc();
  }

  /** Counts one answer given to the app (`check`, a `batch` item) or to a proxy (`forward_auth`, `ext_authz_grpc`). */
  answered(answer: Answer, route: DecisionRoute = 'check'): void {
    this.decisions.inc(this.decisionIndex[decisionSlot(answer.decision, answer.source, route)]!);
  }

  /** Records how long the sidecar took to give an answer (s). */
  answeredIn(answer: Answer, seconds: number): void {
    this.decisionDuration.observe(this.durationIndex[sourceId(answer.source)]!, seconds);
  }

  preEvaluationDenial(reason: string): void {
    (this.preEvaluation.get(reason) ?? this.preEvaluation.get('other'))!.inc();
  }

  failedClosed(cause: FailClosedCause): void {
    this.failClosed.get(cause)!.inc();
  }

  upstreamCall(outcome: UpstreamOutcome, seconds: number): void {
    this.upstreamDuration.observe(this.upstreamIndex[outcome], seconds);
  }

  setBreakerState(state: BreakerState): void {
    for (const s of BREAKER_STATES) this.breakerState.labels(s).set(s === state ? 1 : 0);
  }
}
