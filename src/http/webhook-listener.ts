import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer } from '../lib/node-http.js';
import type { Logger } from '../observability/index.js';
import type { WebhookAnswer, Webhooks } from '../webhooks/index.js';
import { routeTable } from './route-table.js';
import { TIMEOUT_CHECK_INTERVAL_MS } from './listener-bounds.js';

/** Time a client that sent too much gets to read its answer before the socket is cut (ms). */
const DRAIN_GRACE_MS = 1000;

/**
 * `0.0.0.0:7701`, the webhook listener: one route (`POST {path}`), handed to the webhook wing,
 * which answers every delivery; this file only writes answers and decides what becomes of the
 * connection. Every answer is final here; no input can throw out of the handler.
 *
 * @example
 * const server = createWebhookListener(buildWebhooks(cfg.webhooks, ports), logger);
 * await listen(server, cfg.listeners.webhook);
 */
export function createWebhookListener(wing: Webhooks, logger: Logger): Server {
  const receive = (req: IncomingMessage, res: ServerResponse): void => {
    wing.receive(req).then(
      (a) => reply(req, res, a),
      // The wing answers everything; this is for a bug in writing the answer itself.
      (err: unknown) => {
        logger.error({ event: 'webhook_internal_error', err }, 'webhook handler failed');
        reply(req, res, { status: 503, outcome: 'failed', reason: 'internal_error', then: 'close' });
      },
    );
  };
  const dispatch = routeTable(
    [
      {
        path: wing.path,
        // Judged without its query, which the service may add.
        match: 'path',
        methods: ['POST'],
        handle: receive,
        methodNotAllowed: (req, res) => {
          res.setHeader('allow', 'POST');
          reply(req, res, wing.refuse('method_not_allowed', req.socket.remoteAddress));
        },
      },
    ],
    (req, res) => reply(req, res, wing.refuse('not_found', req.socket.remoteAddress)),
  );
  const server = createServer({ connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS }, (req, res) => {
    try {
      dispatch(req, res);
    } catch (err) {
      logger.error({ event: 'webhook_internal_error', err }, 'webhook handler failed');
      reply(req, res, { status: 503, outcome: 'failed', reason: 'internal_error', then: 'close' });
    }
  });
  server.on('clientError', (err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n');
    else socket.destroy();
    logger.debug({ event: 'webhook_client_error', code: (err as NodeJS.ErrnoException).code }, 'bad HTTP from client');
  });
  return server;
}

/** Answer bodies and their headers by status and reason: a closed set, made once each. */
const ANSWERS = new Map<string, { readonly body: string; readonly headers: readonly string[] }>();

function reply(req: IncomingMessage, res: ServerResponse, a: WebhookAnswer): void {
  if (a.then === 'none' || res.headersSent || res.destroyed) return;
  if (a.then === 'discard') discardRest(req);
  else if (a.then === 'close') {
    // A sender refused for load or slowness gets nothing more from us, its socket included.
    res.shouldKeepAlive = false;
    res.once('finish', () => res.socket?.destroy());
    const cut = setTimeout(() => res.socket?.destroy(), DRAIN_GRACE_MS);
    cut.unref();
  }
  const key = `${a.status} ${a.reason}`;
  let w = ANSWERS.get(key);
  if (w === undefined) {
    const body = JSON.stringify(a.status === 200 ? { status: a.reason } : { error: a.reason });
    ANSWERS.set(key, (w = { body, headers: ['content-type', 'application/json', 'content-length', String(Buffer.byteLength(body))] }));
  }
  res.writeHead(a.status, w.headers as string[]);
  res.end(w.body);
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
