import { performance } from 'node:perf_hooks';
import { DecisionError, rejectedAnswer, type Answer, type CheckRequest, type DecisionService } from '../decision/index.js';
import type { DecisionBoundary, RouteBoundary } from '../edge/decision-boundary.js';
import { Deadline, DeadlineQueue, DeadlineQueues } from '../lib/deadline-queue.js';
import { parseCheckRequestMessage } from './check-request.js';
import { checkResponseFor, LAST_RESORT_RESPONSE } from './check-response.js';
import { STREAM_CAP_DETAIL, type CallRefusal, type UnaryMethod } from './server-call.js';

/** One call's reply: a CheckResponse and status OK, written at most once, whatever asks to write it. */
export interface CheckReply {
  /** An answer went out, or there is nobody left to answer. */
  readonly sent: boolean;
  /**
   * When the caller stops waiting, less the room its answer needs to reach it (monotonic ms, from
   * its `grpc-timeout`; see src/grpc/grpc-timeout.ts). Absent or Infinity: no such header, or one
   * not well-formed, and the sidecar's own deadline applies.
   */
  readonly answerBy?: number;
  send(message: Buffer): void;
}

function writeCheckResponse(res: CheckReply, a: Answer, decisionId: string): void {
  if (res.sent) return;
  res.send(checkResponseFor(a, decisionId));
}

/** The fixed UNAVAILABLE/503 reply; a successful gRPC call even now. */
function lastResort(res: CheckReply): void {
  res.send(LAST_RESORT_RESPONSE);
}

/** The ext_authz route's side of the decision boundary: counted once, with an id, as `ext_authz_grpc`. */
export function extAuthzBoundary(boundary: DecisionBoundary): RouteBoundary<CheckReply> {
  return boundary.route('ext_authz_grpc', writeCheckResponse, lastResort);
}

/**
 * The call's deadline passed before the decision came (`--upstream-timeout-ms`, or sooner the
 * caller's `grpc-timeout` less its margin): no decision, as a check's own timeout.
 */
const CALL_DEADLINE = new DecisionError('ERR_UPSTREAM_TIMEOUT', 'the call deadline passed before a decision was had');
/** The listener could not take the request in (its byte budget): no decision, as a shed check. */
const RECEIVE_OVERLOAD = new DecisionError('ERR_OVERLOADED', 'the gRPC listener holds its most of requests not arrived whole');
/** The listener holds its most open calls (`--grpc-max-streams`): no decision, as a shed check. */
const STREAM_OVERLOAD = new DecisionError('ERR_OVERLOADED', 'the gRPC listener holds its most open calls');

/** A call waiting for its decision: answered by whichever comes first, the decision or its deadline. */
class PendingCheck extends Deadline {
  private done = false;

  constructor(
    deadline: number,
    private readonly queue: DeadlineQueue,
    private readonly answers: RouteBoundary<CheckReply>,
    private readonly reply: CheckReply,
    private readonly req: CheckRequest,
    private readonly t0: number,
  ) {
    super(deadline);
  }

  answer(a: Answer): void {
    if (this.done) return;
    this.done = true;
    this.queue.remove(this);
    this.answers.answer(this.reply, a, this.t0, this.req, null);
  }

  fail(err: unknown): void {
    if (this.done) return;
    this.done = true;
    this.queue.remove(this);
    this.answers.fail(this.reply, err, this.t0, this.req, null);
  }

  timeout(): void {
    this.fail(CALL_DEADLINE);
  }
}

/**
 * A caller's time left (ms) as the timeout of one of a few deadline queues, never longer: whole ms
 * below 256 ms, above it rounded down to 128 steps an octave (less than 1/128 of it lost: under 8
 * ms below 2 s). So a caller sending varied `grpc-timeout`s makes at most about 1,700 queues at
 * the most `--upstream-timeout-ms` (600 s), about 630 at its default.
 */
export function callerQueueTimeout(leftMs: number): number {
  const whole = Math.floor(leftMs);
  if (whole < 256) return whole;
  const step = 2 ** (31 - Math.clz32(whole) - 7);
  return whole - (whole % step);
}

export interface CheckHandlerOptions {
  readonly service: DecisionService;
  readonly answers: RouteBoundary<CheckReply>;
  /** Lower-case header carrying the user reference (`--forward-auth-user-header`). */
  readonly userHeader: string;
  /** Largest CheckRequest decided (`--grpc-max-message-bytes`); a larger one is refused (400). */
  readonly maxMessageBytes: number;
  /** Each call's deadline (ms): `--upstream-timeout-ms`, as a check's. */
  readonly timeoutMs: number;
  readonly deadlines: DeadlineQueue;
  /** Deadlines set sooner by a caller's `grpc-timeout`, a queue per {@link callerQueueTimeout} (below `timeoutMs`). */
  readonly callerDeadlines?: DeadlineQueues;
}

/**
 * `envoy.service.auth.v3.Authorization/Check`: the check's decision for the CheckRequest's user
 * header and configKey (cache, coalescing, breaker, refresh-ahead, fail-closed causes), answered
 * through the decision boundary. Whatever reaches it ends as a CheckResponse, never a gRPC error: a
 * request that cannot be read (none, two, cut short, too large, compressed unreadably, too slow)
 * is a 400 denial, one the listener had no room for a 503 `overload`. A client that leaves
 * mid-call is still answered (into nothing) and counted once.
 *
 * A miss's deadline is `--upstream-timeout-ms`, or sooner the caller's `grpc-timeout` less a
 * margin ({@link CheckReply.answerBy}): past it, the same 503 `upstream_timeout` denial, never
 * the caller's own timeout (which Envoy's `failure_mode_allow` would turn into an ALLOW). One with
 * no time left (under a whole ms) is denied at once, no decision asked for: its caller has given
 * up, or will before any answer reaches it. A cache hit is answered at once whatever the header
 * says. The decision asked for is not cut short by the call's deadline: it goes on under its own
 * (`--upstream-timeout-ms`) and is cached for the calls after.
 */
export function createCheckHandler(o: CheckHandlerOptions): UnaryMethod<CheckReply> {
  const { service, answers, deadlines } = o;
  const callerDeadlines = o.callerDeadlines ?? new DeadlineQueues();
  return {
    maxBytes: o.maxMessageBytes,
    request(message, reply) {
      const t0 = performance.now();
      let asked: CheckRequest | undefined;
      let pending: PendingCheck | undefined;
      try {
        const parsed = parseCheckRequestMessage(message, o.userHeader, o.maxMessageBytes);
        if ('field' in parsed) return answers.answer(reply, rejectedAnswer(parsed), t0, undefined, null);
        asked = parsed;
        const hit = service.cached(asked);
        if (hit) return answers.answer(reply, hit, t0, asked, null);
        let queue = deadlines;
        let deadline = t0 + o.timeoutMs;
        const answerBy = reply.answerBy;
        if (answerBy !== undefined && answerBy < deadline) {
          // One of a few fixed timeouts (each queue's deadlines in order), never past answerBy.
          const left = callerQueueTimeout(answerBy - t0);
          if (left <= 0) return answers.fail(reply, CALL_DEADLINE, t0, asked, null);
          queue = callerDeadlines.for(left);
          deadline = t0 + left;
        }
        const p = (pending = new PendingCheck(deadline, queue, answers, reply, asked, t0));
        queue.add(p);
        service.decide(asked, { cacheMissed: true }).then(
          (a) => p.answer(a),
          (err: unknown) => p.fail(err),
        );
      } catch (err) {
        // A throw after the deadline was set (decide() itself) is answered by it, once, and its deadline removed.
        if (pending !== undefined) pending.fail(err);
        else answers.fail(reply, err, t0, asked, null);
      }
    },
    refused(why: CallRefusal, reply) {
      const t0 = performance.now();
      if (why.problem === 'overload') answers.fail(reply, why.detail === STREAM_CAP_DETAIL ? STREAM_OVERLOAD : RECEIVE_OVERLOAD, t0, undefined, null);
      else answers.answer(reply, rejectedAnswer({ field: 'request', problem: why.problem, detail: why.detail }), t0, undefined, null);
    },
  };
}
