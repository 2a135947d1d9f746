import { UNTRACED_STEPS } from '../lib/trace.js';
import { rawTraceContext } from '../observability/trace-context.js';
import { Tracing } from '../observability/tracing.js';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Registry } from 'prom-client';
import type { WebhookConfig } from '../config/index.js';
import type { RevocationPublisher } from '../lib/revocation-hook.js';
import type { Logger } from '../observability/index.js';
import {
  createWebhookMetrics,
  Forwarder,
  MemoryDedupStore,
  readUnverifiedBody,
  startBodyVerification,
  UnverifiedBudget,
  WebhookIngress,
  type DedupStore,
  type EventQueue,
  type IngressAnswer,
} from '../webhooks/index.js';
import { DeadlineQueue } from '../lib/deadline-queue.js';
import { closeGracefully } from './listen.js';

export interface WebhookListenerOptions {
  readonly config: WebhookConfig;
  readonly logger: Logger;
  readonly registry: Registry;
  /** Where revocations learned from events go: this replica's cache, and the other replicas'. */
  readonly revocations: RevocationPublisher;
  /** Clock (epoch ms); defaults to `Date.now`. */
  readonly now?: () => number;
  /** Defaults to an in-memory store sized by `config.dedupMaxEntries` / `dedupRetentionMs`. */
  readonly dedup?: DedupStore;
  /** Queue mode (`config.delivery === 'queue'`): where accepted events go; required then. */
  readonly queue?: EventQueue;
  /** Time given to in-flight deliveries on close (ms); defaults to the forward timeout + 1 s. */
  readonly shutdownTimeoutMs?: number;
  /** OpenTelemetry spans of each delivery and its steps (off by default). */
  readonly tracing?: Tracing;
}

export interface WebhookListener {
  /** Not yet listening: the composition root binds it with `listen()`. */
  readonly server: Server;
  /** Stops accepting, lets in-flight deliveries finish, then closes the app pool and the store. */
  close(): Promise<void>;
}

/** Time a client that sent too much gets to read its 413 before the socket is cut (ms). */
const DRAIN_GRACE_MS = 1000;

/**
 * The webhook ingress: `POST {config.path}` verified, deduplicated and forwarded to the app
 * (contract, part Webhooks). Every answer is final here; no input can throw out of the handler.
 *
 * @example
 * const hooks = createWebhookListener({ config: cfg.webhooks, logger, registry, revocations: cache });
 * await listen(hooks.server, cfg.listeners.webhook);
 */
export function createWebhookListener(options: WebhookListenerOptions): WebhookListener {
  const { config, logger } = options;
  if (config.delivery === 'queue' && !options.queue) throw new RangeError('webhook delivery mode queue needs a queue (--redis-url)');
  const now = options.now ?? ((): number => Date.now());
  const dedup = options.dedup ?? new MemoryDedupStore({ retentionMs: config.dedupRetentionMs, maxEntries: config.dedupMaxEntries, now });
  const forwarder = new Forwarder({ appUrl: config.appUrl, timeoutMs: config.forwardTimeoutMs });
  const metrics = createWebhookMetrics(options.registry);
  // Shared by every connection: what an unauthenticated sender can make us hold, in all.
  const budget = new UnverifiedBudget(config.maxUnverifiedBytes, (n) => metrics.unverifiedBytes.set(n));
  const ingress = new WebhookIngress({
    config,
    logger,
    metrics,
    dedup,
    forwarder,
    revocations: options.revocations,
    ...(config.delivery === 'queue' && options.queue ? { queue: options.queue } : {}),
    now,
  });

  const bodyDeadlines = new DeadlineQueue();
  const ctx: DeliveryContext = { config, ingress, budget, tracing: options.tracing ?? Tracing.OFF, bodyDeadlines };
  const server = createServer((req, res) => {
    handleDelivery(ctx, req, res).catch((err: unknown) => {
      logger.error({ event: 'webhook_internal_error', err }, 'webhook handler failed');
      // 503, not 500: the contract's table has no 500, and the service retries a 503.
      if (!res.headersSent) answerAndClose(res, 503, 'internal_error');
      else res.destroy();
    });
  });
  server.on('clientError', (err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n');
    else socket.destroy();
    logger.debug({ event: 'webhook_client_error', code: (err as NodeJS.ErrnoException).code }, 'bad HTTP from client');
  });

  return {
    server,
    async close() {
      await closeGracefully(server, options.shutdownTimeoutMs ?? config.forwardTimeoutMs + 1000);
      // The drain had its time: a forward still hanging on the app must not outlive it.
      await forwarder.destroy();
      bodyDeadlines.clear();
      await dedup.close();
    },
  };
}

/** Answer bodies and their headers by status and reason: a closed set, made once each. */
const ANSWERS = new Map<string, { readonly body: string; readonly headers: readonly string[] }>();

function answer(res: ServerResponse, status: number, reason: string): void {
  if (res.headersSent || res.destroyed) return;
  const key = `${status} ${reason}`;
  let a = ANSWERS.get(key);
  if (a === undefined) {
    const body = JSON.stringify(status === 200 ? { status: reason } : { error: reason });
    ANSWERS.set(key, (a = { body, headers: ['content-type', 'application/json', 'content-length', String(Buffer.byteLength(body))] }));
  }
  res.writeHead(status, a.headers as string[]);
  res.end(a.body);
}

/**
 * Answers and closes the connection once the answer is out, without reading the rest of the body:
 * a sender refused for load or slowness gets nothing more from us, its socket included.
 */
function answerAndClose(res: ServerResponse, status: number, reason: string): void {
  if (res.headersSent || res.destroyed) return;
  res.shouldKeepAlive = false;
  res.once('finish', () => res.socket?.destroy());
  answer(res, status, reason);
  const cut = setTimeout(() => res.socket?.destroy(), DRAIN_GRACE_MS);
  cut.unref();
}

/**
 * Lets the rest of an unread body flow to nowhere (no buffering) so the client finishes sending and
 * reads our answer instead of a reset; a client still sending after {@link DRAIN_GRACE_MS} is cut.
 * The connection is not closed on purpose: closing while the client writes can make its kernel drop
 * our answer.
 */
function discardRest(req: IncomingMessage): void {
  if (req.complete) return;
  const cut = setTimeout(() => req.socket.destroy(), DRAIN_GRACE_MS);
  cut.unref();
  const done = (): void => clearTimeout(cut);
  req.once('end', done);
  req.once('close', done);
  req.on('error', () => undefined);
  req.resume();
}

/** The headers a delivery is judged on (besides the required one, when configured). */
const JUDGED = new Set(['x-service-timestamp', 'x-service-signature', 'x-service-delivery-id']);

/**
 * The headers the ingress judges a delivery on, each as the list of its values, so one given twice
 * is seen as such (node would join it into one value). Picked from the raw list in one pass: node's
 * `headersDistinct` would build an array for every header the sender sent.
 */
function deliveryHeaders(raw: readonly string[], required: string | undefined): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (!JUDGED.has(name) && name !== required) continue;
    const values = out[name];
    if (values === undefined) out[name] = [raw[i + 1]!];
    else values.push(raw[i + 1]!);
  }
  return out;
}

/** What one delivery is handled with. */
interface DeliveryContext {
  readonly config: WebhookConfig;
  readonly ingress: WebhookIngress;
  readonly budget: UnverifiedBudget;
  readonly tracing: Tracing;
  /** The bodies being read, by deadline (they all have `config.bodyTimeoutMs`). */
  readonly bodyDeadlines: DeadlineQueue;
}

/** One delivery: the route, the headers, the body read under the HMAC and the budget, then the ingress. */
async function handleDelivery({ config, ingress, budget, tracing, bodyDeadlines }: DeliveryContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const remote = req.socket.remoteAddress;
  const path = (req.url ?? '').split('?', 1)[0];
  if (path !== config.path) {
    ingress.rejectRoute('not_found', remote);
    discardRest(req);
    return answer(res, 404, 'not_found');
  }
  if (req.method !== 'POST') {
    ingress.rejectRoute('method_not_allowed', remote);
    res.setHeader('allow', 'POST');
    discardRest(req);
    return answer(res, 405, 'method_not_allowed');
  }

  // Read once: the header picked and the header judged are the same one, even across a rotation.
  const required = config.requiredHeader?.current() ?? null;
  const headers = deliveryHeaders(req.rawHeaders, required?.name);
  const checked = ingress.checkHeaders(headers, remote, required);
  if (!('ok' in checked)) {
    // Refused on headers alone: the body is never looked at.
    discardRest(req);
    return answer(res, checked.status, checked.reason);
  }

  // Spans on: the delivery's span, its steps (verify, dedup, forward or enqueue) children of it.
  const traced = tracing.on ? tracing.webhook(config.path, rawTraceContext(req.rawHeaders)) : null;
  const steps = traced?.steps ?? UNTRACED_STEPS;
  let outcome: string | undefined;
  if (traced) res.once('close', () => traced.end(res.statusCode, outcome));
  // The HMAC runs over the chunks as they arrive; every byte held until the verdict is taken
  // from the budget shared by all connections.
  const read = await steps.step('verify', () =>
    readUnverifiedBody(req, {
      maxBytes: config.maxBodyBytes,
      budget,
      timeoutMs: config.bodyTimeoutMs,
      deadlines: bodyDeadlines,
      verifier: startBodyVerification(checked, config.secrets.current()),
    }),
  );
  if (!read.ok) {
    switch (read.reason) {
      case 'aborted':
        return;
      case 'too_large':
        ingress.rejectRoute('body_too_large', remote);
        discardRest(req);
        return answer(res, 413, 'body_too_large');
      case 'over_budget':
        // 503: the service retries later, when the unauthenticated load has gone.
        ingress.rejectRoute('unverified_budget_exhausted', remote);
        return answerAndClose(res, 503, 'unverified_budget_exhausted');
      case 'body_timeout':
        ingress.rejectRoute('body_timeout', remote);
        return answerAndClose(res, 503, 'body_timeout');
    }
  }

  const result: IngressAnswer = await ingress.receiveVerified(headers, read.verified, read.body, remote, steps);
  outcome = result.reason;
  answer(res, result.status, result.reason);
}
