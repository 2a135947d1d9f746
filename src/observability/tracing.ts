import type * as OtelApi from '@opentelemetry/api';
import type { Attributes, Context, Span, SpanContext, TextMapPropagator, Tracer } from '@opentelemetry/api';
import type { DeliveryTrace, RequestTrace, TracedAnswer, UpstreamCallTrace, WebhookTracer } from '../lib/trace.js';
import { passedOn, validTraceparent, validTracestate } from './trace-context.js';

/** The sampler, as `OTEL_TRACES_SAMPLER` names it. */
export type SamplerName = 'always_on' | 'always_off' | 'traceidratio' | 'parentbased_always_on' | 'parentbased_always_off' | 'parentbased_traceidratio';
export const SAMPLER_NAMES: readonly SamplerName[] = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'];

/** OpenTelemetry spans, on when an OTLP endpoint is configured (the standard `OTEL_*` variables). */
export interface TracingOptions {
  readonly sampler: SamplerName;
  /** `OTEL_TRACES_SAMPLER_ARG`: the ratio of the `traceidratio` samplers. */
  readonly ratio: number;
  /** `OTEL_BSP_SCHEDULE_DELAY`: how long spans wait to be exported in a batch (ms). */
  readonly scheduleDelayMs: number;
}

/**
 * The API's values (its enums, `trace`, `ROOT_CONTEXT`) come from the module `startTracing` loads
 * when tracing is on: with it off, a pod never loads `@opentelemetry/api` (about a hundred modules).
 * `SpanStatusCode.ERROR` is 2 in the API's stable enum.
 */
type Otel = typeof OtelApi;
const STATUS_ERROR = 2 as OtelApi.SpanStatusCode.ERROR;

const NO_CALL_SPAN: Omit<UpstreamCallTrace, 'headers'> = { end: () => undefined };

/**
 * Spans off, a `traceparent` from the app: the service's call carries it as it came (the app's
 * trace goes on at the service), nothing else is done.
 */
class PassedTrace implements RequestTrace {
  private readonly call: UpstreamCallTrace;
  constructor(headers: readonly string[]) {
    this.call = { headers, ...NO_CALL_SPAN };
  }
  upstreamCall(): UpstreamCallTrace {
    return this.call;
  }
  joined(): void {}
  end(): void {}
}

/** The call to the service as a client span, the W3C headers of its context to send. */
class CallSpan implements UpstreamCallTrace {
  constructor(
    readonly span: Span,
    readonly headers: readonly string[],
  ) {}
  end(outcome: string): void {
    this.span.setAttribute('consent.upstream.outcome', outcome);
    if (outcome !== 'ok') failed(this.span, outcome);
    this.span.end();
  }
}

/** Spans on: the request's server span, its call to the service a child of it. */
class SpanTrace implements RequestTrace {
  constructor(
    private readonly t: Tracing,
    private readonly span: Span,
    private readonly route: string,
    private readonly method: string,
  ) {}
  upstreamCall(): UpstreamCallTrace {
    return this.t.callSpan(this.span, this.route === 'passthrough' ? this.method : null);
  }
  joined(call: UpstreamCallTrace): void {
    if (call instanceof CallSpan) this.span.addLink({ context: call.span.spanContext(), attributes: { 'consent.coalesced': true } });
  }
  end(answer: TracedAnswer, configKey?: string, decisionId?: string): void {
    const s = this.span;
    s.setAttribute('consent.route', this.route);
    s.setAttribute('consent.decision', answer.decision);
    s.setAttribute('consent.decision.source', answer.source);
    s.setAttribute('http.response.status_code', answer.status);
    if (answer.cause !== undefined) s.setAttribute('consent.fail_closed.cause', answer.cause);
    if (configKey !== undefined) s.setAttribute('consent.config_key', configKey);
    if (decisionId !== undefined) s.setAttribute('consent.decision_id', decisionId);
    // Semantic conventions: a server span is in error on 5xx only; error.type says why.
    if (answer.status >= 500) failed(s, answer.cause ?? String(answer.status));
    s.end();
  }
}

/** Marks a span failed (semantic conventions: `error.type`, status ERROR). */
function failed(span: Span, type: string): void {
  span.setAttribute('error.type', type);
  span.setStatus({ code: STATUS_ERROR, message: type });
}

/** An error's stable code (`ERR_…`) or its class name; `_OTHER` (the conventions' fallback) for anything else. */
function errorType(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^[A-Za-z0-9_.-]{1,64}$/.test(code)) return code;
  const name = (err as { name?: unknown } | null)?.name;
  return typeof name === 'string' && /^[A-Za-z0-9_]{1,64}$/.test(name) ? name : '_OTHER';
}

const getter = {
  keys: (c: Record<string, string>) => Object.keys(c),
  get: (c: Record<string, string>, k: string) => c[k],
};
const setter = { set: (c: string[], k: string, v: string) => void c.push(k, v) };

/**
 * The sidecar's tracing: off (the default) costs a boolean test per request; with a `traceparent`
 * from the app, the header alone travels to the service. On, it makes the spans the contract names:
 * a server span per decision, a client span per call to the service (the `traceparent` the service
 * gets is its child), span links from coalesced requests to the one call, a span per webhook with
 * its verify, dedup and forward steps, a span per REDEC run. Never a user reference in a span.
 */
export class Tracing implements WebhookTracer {
  /** What `serve` runs with when no OTLP endpoint is configured. */
  static readonly OFF = new Tracing(null, null, null, null);

  /** The check's call to the service (POST to the check URL). */
  private readonly callAttributes: Attributes;
  /** A passthrough call: the service's address only; its URL may name a user, so it is not kept. */
  private readonly serverAttributes: Attributes;

  private constructor(
    private readonly api: Otel | null,
    private readonly tracer: Tracer | null,
    private readonly propagator: TextMapPropagator | null,
    upstreamUrl: URL | null,
    private readonly close: () => Promise<void> = () => Promise.resolve(),
  ) {
    const url = upstreamUrl ?? new URL('http://invalid');
    this.serverAttributes = Object.freeze({
      'server.address': url.hostname,
      'server.port': Number(url.port || (url.protocol === 'https:' ? 443 : 80)),
    });
    this.callAttributes = Object.freeze({
      'http.request.method': 'POST',
      'url.full': `${url.origin}${url.pathname.replace(/\/$/, '')}/v1/authorization/check`,
      ...this.serverAttributes,
    });
  }

  /** @internal for {@link startTracing}. */
  static on(api: Otel, tracer: Tracer, propagator: TextMapPropagator, upstreamUrl: URL, close: () => Promise<void>): Tracing {
    return new Tracing(api, tracer, propagator, upstreamUrl, close);
  }

  get on(): boolean {
    return this.tracer !== null;
  }

  /**
   * The trace of one decision request (`route`: check, forward_auth), from the app's headers; null
   * when spans are off and the app sent no valid `traceparent` (nothing to do).
   */
  request(route: string, method: string, path: string, traceparent: string | undefined, tracestate: string | undefined): RequestTrace | null {
    if (this.tracer === null) {
      const passed = passedOn(traceparent, tracestate);
      return passed.length === 0 ? null : new PassedTrace(passed);
    }
    const parent = validTraceparent(traceparent);
    const span = this.tracer.startSpan(
      `${method} ${path}`,
      { kind: this.api!.SpanKind.SERVER, attributes: { 'http.request.method': method, 'http.route': path, 'consent.route': route } },
      this.parentContext(parent, tracestate),
    );
    return new SpanTrace(this, span, route, method);
  }

  /**
   * @internal the client span of a call to the service under `parent`, and the headers of its
   * context: the check's POST, or (`passthroughMethod`) a passthrough's call with that method.
   */
  callSpan(parent: Span, passthroughMethod: string | null): UpstreamCallTrace {
    const { trace, ROOT_CONTEXT, SpanKind } = this.api!;
    const ctx = trace.setSpan(ROOT_CONTEXT, parent);
    const span = this.tracer!.startSpan(
      passthroughMethod ?? 'POST',
      { kind: SpanKind.CLIENT, attributes: passthroughMethod === null ? this.callAttributes : { 'http.request.method': passthroughMethod, ...this.serverAttributes } },
      ctx,
    );
    const headers: string[] = [];
    this.propagator!.inject(trace.setSpan(ROOT_CONTEXT, span), headers, setter);
    return new CallSpan(span, headers);
  }

  /**
   * One webhook delivery: a server span that is a root of the sidecar's own (its sampling, its
   * trace id), whose steps are child spans. Once the signature is verified, the sender's
   * well-formed trace context is linked to it, never made its parent: an unsigned sender chooses
   * nothing of what is exported. `end` says how it was answered. Null when spans are off.
   */
  webhook(path: string): DeliveryTrace {
    const { trace, ROOT_CONTEXT, SpanKind } = this.api!;
    const span = this.tracer!.startSpan(`POST ${path}`, { kind: SpanKind.SERVER, attributes: { 'http.request.method': 'POST', 'http.route': path } }, ROOT_CONTEXT);
    return {
      step: (name, work) => this.inSpan(`consent.webhook.${name}`, span, work),
      verified: (traceparent, tracestate) => {
        if (traceparent === undefined || traceparent.length !== 1) return;
        const parent = validTraceparent(traceparent[0]);
        if (parent === null) return;
        const linked = trace.getSpanContext(this.parentContext(parent, tracestate?.join(',')));
        if (linked) span.addLink({ context: linked, attributes: { 'consent.link': 'sender' } });
      },
      end: (status, reason) => {
        span.setAttribute('http.response.status_code', status);
        if (reason !== undefined) span.setAttribute('consent.webhook.outcome', reason);
        if (status >= 500) failed(span, reason ?? String(status));
        span.end();
      },
    };
  }

  /** The webhook wing's tracer when spans are on, else null. */
  get webhookTracer(): (WebhookTracer & Pick<Tracing, 'run'>) | null {
    return this.tracer === null ? null : this;
  }

  /**
   * A unit of background work (a REDEC run) as a root span of its own. `outcome` reads what the
   * work resolved to: `consent.outcome` on the span, an error status (and `error.type`) when failed.
   */
  run<T>(name: string, work: () => Promise<T>, outcome?: (result: T) => { readonly outcome: string; readonly failed: boolean }): Promise<T> {
    if (this.tracer === null) return work();
    return this.inSpan(name, null, work, outcome);
  }

  /**
   * Flushes what is buffered and stops exporting, waiting at most `timeoutMs`: a collector that is
   * not there costs the spans still buffered, never the shutdown budget.
   */
  shutdown(timeoutMs: number): Promise<void> {
    if (this.tracer === null) return Promise.resolve();
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
      timer.unref();
    });
    return Promise.race([this.close().catch(() => undefined), late]).finally(() => clearTimeout(timer));
  }

  private async inSpan<T>(name: string, parent: Span | null, work: () => Promise<T>, outcome?: (result: T) => { readonly outcome: string; readonly failed: boolean }): Promise<T> {
    const { trace, ROOT_CONTEXT, SpanKind } = this.api!;
    const span = this.tracer!.startSpan(name, { kind: SpanKind.INTERNAL }, parent ? trace.setSpan(ROOT_CONTEXT, parent) : ROOT_CONTEXT);
    try {
      const result = await work();
      const o = outcome?.(result);
      if (o !== undefined) {
        span.setAttribute('consent.outcome', o.outcome);
        if (o.failed) failed(span, o.outcome);
      }
      return result;
    } catch (err) {
      // The error's code or class, never its message: a message may quote what it failed on.
      failed(span, errorType(err));
      throw err;
    } finally {
      span.end();
    }
  }

  private parentContext(traceparent: string | null, tracestate: string | undefined): Context {
    const { ROOT_CONTEXT } = this.api!;
    if (traceparent === null) return ROOT_CONTEXT;
    const carrier: Record<string, string> = { traceparent };
    const state = validTracestate(tracestate);
    if (state !== null) carrier.tracestate = state;
    return this.propagator!.extract(ROOT_CONTEXT, carrier, getter);
  }
}

/** A span context, for tests and links. */
export type { SpanContext };
