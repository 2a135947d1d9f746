/**
 * What a request's trace lets a capability do, without knowing whether spans are on
 * (src/observability/tracing.ts implements it; the listeners make one per request that needs one).
 * With spans off and a `traceparent` from the app, only the W3C headers travel, as they came.
 */
export interface RequestTrace {
  /** The call this request makes to the service: its span (spans on) and the W3C headers to send with it. */
  upstreamCall(): UpstreamCallTrace;
  /** This request joined a call already in flight (a coalesced miss): its span links to that call. */
  joined(call: UpstreamCallTrace): void;
  /**
   * The request was answered: its span gets what was answered (and the answer's decision id,
   * `consent.decision_id`) and ends. Never the user reference.
   */
  end(answer: TracedAnswer, configKey?: string, decisionId?: string): void;
}

/** The call to the service, as traced. */
export interface UpstreamCallTrace {
  /** `traceparent` (and `tracestate`) name/value pairs, for the call's headers. */
  readonly headers: readonly string[];
  /** The call ended: `outcome` is the upstream duration histogram's label (ok, timeout, …). */
  end(outcome: string): void;
}

/** What an answer says, as a span attribute may show it. */
export interface TracedAnswer {
  readonly status: number;
  readonly decision: string;
  readonly source: string;
  readonly cause?: string;
}

/** One webhook delivery's trace: each step (verify, dedup, forward, enqueue) is a span of its own when spans are on. */
export interface StepTrace {
  step<T>(name: string, work: () => Promise<T>): Promise<T>;
}

/**
 * One webhook delivery's span: a root of the sidecar's own until the signature is verified (an
 * unsigned sender never chooses the trace id, the sampling or the state of the spans exported).
 */
export interface DeliveryTrace extends StepTrace {
  /** The signature verified: the sender's trace context (each header's values) is linked, when well-formed. */
  verified(traceparent: readonly string[] | undefined, tracestate: readonly string[] | undefined): void;
  /** The delivery was answered `status` (`reason`: the answer body's reason). */
  end(status: number, reason?: string): void;
}

/** What makes a delivery's span (spans on); the webhook wing holds null when they are off. */
export interface WebhookTracer {
  webhook(path: string): DeliveryTrace;
}

/** Steps traced by nobody: the work, run as is. */
export const UNTRACED_STEPS: StepTrace = { step: (_name, work) => work() };
