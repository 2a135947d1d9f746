import { performance } from 'node:perf_hooks';
import { DecisionError, rejectedAnswer, type Answer, type CheckRequest, type DecisionService } from '../decision/index.js';
import type { DecisionBoundary, RouteBoundary } from '../edge/decision-boundary.js';
import { Deadline, DeadlineQueue } from '../lib/deadline-queue.js';
import { parseCheckRequestMessage } from './check-request.js';
import { checkResponseFor, LAST_RESORT_RESPONSE } from './check-response.js';
import { STREAM_CAP_DETAIL, type CallRefusal, type UnaryMethod } from './server-call.js';

/** One call's reply: a CheckResponse and status OK, written at most once, whatever asks to write it. */
export interface CheckReply {
  /** An answer went out, or there is nobody left to answer. */
  readonly sent: boolean;
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

/** The call's deadline passed before the decision came: no decision, as a check's own timeout. */
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
}

/**
 * `envoy.service.auth.v3.Authorization/Check`: the check's decision for the CheckRequest's user
 * header and configKey (cache, coalescing, breaker, refresh-ahead, fail-closed causes), answered
 * through the decision boundary. Whatever reaches it ends as a CheckResponse, never a gRPC error: a
 * request that cannot be read (none, two, cut short, too large, compressed unreadably, too slow)
 * is a 400 denial, one the listener had no room for a 503 `overload`. A client that leaves
 * mid-call is still answered (into nothing) and counted once.
 */
export function createCheckHandler(o: CheckHandlerOptions): UnaryMethod<CheckReply> {
  const { service, answers, deadlines } = o;
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
        const p = (pending = new PendingCheck(t0 + o.timeoutMs, deadlines, answers, reply, asked, t0));
        deadlines.add(p);
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
