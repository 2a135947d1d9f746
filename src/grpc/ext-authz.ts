import { performance } from 'node:perf_hooks';
import type { sendUnaryData, ServerUnaryCall } from '@grpc/grpc-js';
import { DecisionError, rejectedAnswer, type Answer, type CheckRequest, type DecisionService } from '../decision/index.js';
import type { DecisionBoundary, RouteBoundary } from '../http/decision-boundary.js';
import { Deadline, DeadlineQueue } from '../lib/deadline-queue.js';
import { parseCheckRequestMessage } from './check-request.js';
import { checkResponseFor, LAST_RESORT_RESPONSE } from './check-response.js';

/** One call's reply: written at most once, whatever asks to write it. */
export interface CheckReply {
  readonly callback: sendUnaryData<Buffer>;
  sent: boolean;
}

function writeCheckResponse(res: CheckReply, a: Answer, decisionId: string): void {
  if (res.sent) return;
  const message = checkResponseFor(a, decisionId);
  res.sent = true;
  res.callback(null, message);
}

/** The fixed UNAVAILABLE/503 reply; a successful gRPC call even now. */
function lastResort(res: CheckReply): void {
  if (res.sent) return;
  res.sent = true;
  res.callback(null, LAST_RESORT_RESPONSE);
}

/** The ext_authz route's side of the decision boundary: counted once, with an id, as `ext_authz_grpc`. */
export function extAuthzBoundary(boundary: DecisionBoundary): RouteBoundary<CheckReply> {
  return boundary.route('ext_authz_grpc', writeCheckResponse, lastResort);
}

/** The call's deadline passed before the decision came: no decision, as a check's own timeout. */
const CALL_DEADLINE = new DecisionError('ERR_UPSTREAM_TIMEOUT', 'the call deadline passed before a decision was had');

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
 * through the decision boundary. The message arrives as raw bytes (grpc-js deserializes nothing):
 * what cannot be read is a refusal written by this code, never an error status of the transport.
 * A client that leaves mid-call is still answered (into nothing) and counted once.
 */
export function createCheckHandler(o: CheckHandlerOptions): (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => void {
  const { service, answers, deadlines } = o;
  return (call, callback) => {
    const t0 = performance.now();
    const reply: CheckReply = { callback, sent: false };
    let asked: CheckRequest | undefined;
    try {
      const parsed = parseCheckRequestMessage(call.request, o.userHeader, o.maxMessageBytes);
      if ('field' in parsed) return answers.answer(reply, rejectedAnswer(parsed), t0, undefined, null);
      asked = parsed;
      const hit = service.cached(asked);
      if (hit) return answers.answer(reply, hit, t0, asked, null);
      const pending = new PendingCheck(t0 + o.timeoutMs, deadlines, answers, reply, asked, t0);
      deadlines.add(pending);
      service.decide(asked, { cacheMissed: true }).then(
        (a) => pending.answer(a),
        (err: unknown) => pending.fail(err),
      );
    } catch (err) {
      answers.fail(reply, err, t0, asked, null);
    }
  };
}
