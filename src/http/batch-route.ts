import type { IncomingMessage, ServerResponse } from 'node:http';
import { cacheKey, DecisionError, MAX_FIELD_LENGTH, refusedBatchAnswer, type Answer, type CheckRequest, type DecisionService } from '../decision/index.js';
import { locateDuplicateMember, type DuplicateMember } from '../lib/duplicate-member.js';
import type { RequestTrace } from '../lib/trace.js';
import { rawTraceContext } from '../observability/trace-context.js';
import type { Tracing } from '../observability/tracing.js';
import { jsonLastResort, writeJsonAnswer } from './check-route.js';
import type { DecisionBoundary } from '../edge/decision-boundary.js';

/** `POST` here: several checks in one request (contract, The application's side). */
export const BATCH_PATH = '/sidecar/authorization/check-batch';
/** Most checks in one batch. */
export const MAX_BATCH_ITEMS = 100;
/** Calls to the service one batch makes at once (each also counts in `--upstream-max-in-flight`). */
export const BATCH_CONCURRENCY = 16;
/** Largest batch body (bytes): 100 items of the longest fields, escaped, fit. */
export const MAX_BATCH_BODY_BYTES = 1_048_576;

export interface BatchRouteOptions {
  readonly service: DecisionService;
  readonly boundary: DecisionBoundary;
  /** The whole batch's deadline (ms): `--upstream-timeout-ms`, as for one check. */
  readonly timeoutMs: number;
  readonly tracing: Tracing;
}

/** What is wrong with a batch request: the whole of it is refused (400), naming the item. */
interface BatchRefusal {
  readonly field: string;
  readonly index?: number;
  readonly detail: string;
}

/** The checks of a batch body, or what is wrong with it (each item held to the single check's rules). */
export function parseBatch(body: string): CheckRequest[] | BatchRefusal {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return { field: 'body', detail: 'body is not valid JSON' };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { field: 'body', detail: 'body must be a JSON object' };
  // A repeated member is read as its last value by JSON.parse and maybe as its first by the app:
  // an ambiguous batch is refused, naming the item that holds it.
  const duplicate = locateDuplicateMember(body);
  if (duplicate !== undefined) return duplicateRefusal(duplicate);
  const checks = (value as { checks?: unknown }).checks;
  if (!Array.isArray(checks)) return { field: 'checks', detail: 'checks must be an array of {userReference, configKey}' };
  if (checks.length === 0) return { field: 'checks', detail: 'checks must hold at least one check' };
  if (checks.length > MAX_BATCH_ITEMS) return { field: 'checks', detail: `checks holds ${checks.length} items; at most ${MAX_BATCH_ITEMS} are accepted` };
  const out: CheckRequest[] = [];
  for (let i = 0; i < checks.length; i++) {
    const item: unknown = checks[i];
    if (typeof item !== 'object' || item === null || Array.isArray(item)) return { field: `checks[${i}]`, index: i, detail: `checks[${i}] must be an object` };
    const { userReference, configKey } = item as Record<string, unknown>;
    for (const [name, v] of [['userReference', userReference], ['configKey', configKey]] as const) {
      const where = `checks[${i}].${name}`;
      if (typeof v !== 'string') return { field: where, index: i, detail: `${where} must be a string${v === undefined ? ' and is missing' : ''}` };
      if (v.length === 0) return { field: where, index: i, detail: `${where} must not be empty` };
      if (v.length > MAX_FIELD_LENGTH) return { field: where, index: i, detail: `${where} is longer than ${MAX_FIELD_LENGTH} characters` };
    }
    out.push({ userReference: userReference as string, configKey: configKey as string });
  }
  return out;
}

/** Where a repeated member is: the item of `checks` that holds it (and its field), or the body. */
function duplicateRefusal({ name, path }: DuplicateMember): BatchRefusal {
  const detail = `member "${name.slice(0, 64)}" appears more than once`;
  if (path.length === 0) return { field: name === 'checks' ? 'checks' : 'body', detail: `${detail}; the request is ambiguous` };
  const [top, index] = path;
  if (top !== 'checks' || typeof index !== 'number') return { field: 'body', detail: `${detail} in one object; the request is ambiguous` };
  const where = `checks[${index}]`;
  const field = path.length === 2 && (name === 'userReference' || name === 'configKey') ? `${where}.${name}` : where;
  return { field, index, detail: `${detail} in ${where}; the item is ambiguous` };
}

/** The single check's body with `source` and `decisionId` added (the body is always one JSON object). */
function itemJson(a: Answer, decisionId: string): string {
  return `${a.body.slice(0, -1)},"source":"${a.source}","decisionId":"${decisionId}"}`;
}

function writeJson(res: ServerResponse, status: number, body: string): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, ['content-type', 'application/json', 'content-length', String(Buffer.byteLength(body)), 'cache-control', 'no-store']).end(body);
}

/**
 * `POST /sidecar/authorization/check-batch`: up to 100 checks, each decided exactly as a single
 * check (cache, coalescing, breaker, refresh-ahead, fail closed per item: one item's failure never
 * changes another's answer), all under one deadline. Items of the same request share one call; at
 * most {@link BATCH_CONCURRENCY} calls at once. Each item is counted and logged (`route="batch"`)
 * with its own decision id; the answer keeps request order.
 */
export function createBatchRoute(o: BatchRouteOptions): (req: IncomingMessage, res: ServerResponse) => void {
  // A refused batch is one answer: counted once (`route="batch"`, `rejected`) with its decision id.
  const refusals = o.boundary.route('batch', writeJsonAnswer, jsonLastResort);
  const refuse = (res: ServerResponse, r: BatchRefusal, t0: number, trace: RequestTrace | null): void =>
    refusals.answer(res, refusedBatchAnswer(r.field, r.detail, r.index), t0, undefined, trace);
  return (req, res) => {
    const t0 = performance.now();
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      const before = size;
      size += chunk.length;
      if (size <= MAX_BATCH_BODY_BYTES) chunks.push(chunk);
      else if (before <= MAX_BATCH_BODY_BYTES) {
        chunks.length = 0;
        res.shouldKeepAlive = false;
        refuse(res, { field: 'body', detail: `body larger than ${MAX_BATCH_BODY_BYTES} bytes` }, t0, null);
      }
    });
    req.on('error', () => undefined);
    req.on('end', () => {
      if (size > MAX_BATCH_BODY_BYTES) return;
      const tc = rawTraceContext(req.rawHeaders);
      const trace = tc.traceparent === undefined && !o.tracing.on ? null : o.tracing.request('batch', 'POST', BATCH_PATH, tc.traceparent, tc.tracestate);
      let parsed: CheckRequest[] | BatchRefusal;
      try {
        parsed = parseBatch(Buffer.concat(chunks, size).toString('utf8'));
      } catch (err) {
        parsed = { field: 'body', detail: 'body could not be read' };
        o.boundary.lastResortLog('batch', err, 'batch body could not be parsed');
      }
      if (!Array.isArray(parsed)) return refuse(res, parsed, t0, trace);
      new Batch(o, parsed, res, t0, trace).run();
    });
  };
}

/** The batch deadline passed before this item's decision came: no decision, as a single check's timeout. */
const BATCH_DEADLINE = new DecisionError('ERR_UPSTREAM_TIMEOUT', 'the batch deadline passed before this check was decided');
/** The batch deadline passed before the batch could ask for this item (its calls run {@link BATCH_CONCURRENCY} at a time): never sent. */
const NOT_ASKED = new DecisionError('ERR_OVERLOADED', 'not sent: the batch deadline passed before this check could be asked');

/** One batch in flight: its items, the distinct requests still to decide, its deadline. */
class Batch {
  private readonly results: (string | undefined)[];
  private left: number;
  /** Distinct requests still to ask, and the items waiting on each. */
  private readonly waiting = new Map<string, { req: CheckRequest; items: number[] }>();
  private readonly queue: string[] = [];
  private running = 0;
  private timer: NodeJS.Timeout | undefined;
  private done = false;

  constructor(
    private readonly o: BatchRouteOptions,
    private readonly checks: CheckRequest[],
    private readonly res: ServerResponse,
    private readonly t0: number,
    private readonly trace: RequestTrace | null,
  ) {
    this.results = new Array<string | undefined>(checks.length);
    this.left = checks.length;
  }

  run(): void {
    for (let i = 0; i < this.checks.length; i++) {
      const req = this.checks[i]!;
      let hit: Answer | undefined;
      try {
        hit = this.o.service.cached(req);
      } catch (err) {
        this.fail(i, err);
        continue;
      }
      if (hit) {
        this.settle(i, hit);
        continue;
      }
      const key = cacheKey(req);
      const w = this.waiting.get(key);
      if (w) w.items.push(i);
      else {
        this.waiting.set(key, { req, items: [i] });
        this.queue.push(key);
      }
    }
    if (this.left === 0) return this.finish();
    this.timer = setTimeout(() => this.expire(), this.o.timeoutMs);
    this.pump();
  }

  private pump(): void {
    while (!this.done && this.running < BATCH_CONCURRENCY && this.queue.length > 0) {
      const key = this.queue.shift()!;
      const { req, items } = this.waiting.get(key)!;
      this.running++;
      let decision: Promise<Answer>;
      try {
        decision = this.o.service.decide(req, { cacheMissed: true, trace: this.trace });
      } catch (err) {
        decision = Promise.reject(err);
      }
      decision
        .then(
          (a) => this.answerAll(key, items, a, undefined),
          (err: unknown) => this.answerAll(key, items, undefined, err),
        )
        .finally(() => {
          this.running--;
          this.pump();
        });
    }
  }

  /** The items of one request: all the decision `a`, or all no decision (`err`), each counted on its own. */
  private answerAll(key: string, items: number[], a: Answer | undefined, err: unknown): void {
    if (this.done) return;
    this.waiting.delete(key);
    for (const i of items) {
      if (a !== undefined) this.settle(i, a);
      else this.fail(i, err);
    }
    if (this.left === 0) this.finish();
  }

  /**
   * The deadline: every item still waiting is no decision, nothing more is asked: `upstream_timeout`
   * when its call was under way, `overload` when the batch never got to ask for it.
   */
  private expire(): void {
    if (this.done) return;
    const notAsked = new Set(this.queue);
    for (const [key, { items }] of this.waiting) for (const i of items) this.fail(i, notAsked.has(key) ? NOT_ASKED : BATCH_DEADLINE);
    this.waiting.clear();
    this.queue.length = 0;
    this.finish();
  }

  /** One item without a decision: its cause's DENY, counted by cause like a single check. */
  private fail(i: number, err: unknown): void {
    if (this.results[i] !== undefined) return;
    this.settle(i, this.o.boundary.failClosed(err, 'batch'));
  }

  /** One item answered: counted and logged once, with its id. */
  private settle(i: number, a: Answer): void {
    if (this.results[i] !== undefined) return;
    const { answer, decisionId } = this.o.boundary.item('batch', a, this.t0, this.checks[i]!);
    this.results[i] = itemJson(answer, decisionId);
    this.left--;
  }

  private finish(): void {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.timer);
    this.trace?.end({ status: 200, decision: 'batch', source: 'batch' });
    writeJson(this.res, 200, `{"results":[${this.results.join(',')}]}`);
  }
}
