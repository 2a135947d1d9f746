import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { verifyForwardedEvent } from '../client/index.js';
import { formatHostPort, type ListenAddress } from '../lib/listen-address.js';
import { RECONCILED_EVENT_TYPE } from '../redec/index.js';

/** One event the demo app received from the sidecar. */
export interface DemoAppEvent {
  readonly id: string;
  readonly type: string;
  readonly sequence: number;
  readonly data: Record<string, unknown>;
  readonly headers: Record<string, string | string[] | undefined>;
}


/**
 * The demo's application, written as the docs say an app should be: it takes an event only when
 * `verifyForwardedEvent` says it is a genuine, fresh forward of its sidecar (signed with the demo's
 * app signing secret), prints it and says so; anything else posted to it is refused with 401 and
 * printed as refused. It tells the sidecar's REDEC hand-over (its own type) from a service event.
 * `POST /_demo/down` makes it answer 503 (as an app that is down), `POST /_demo/up` brings it back.
 */
export async function startDemoApp(
  address: ListenAddress,
  print: (line: string) => void,
  received: DemoAppEvent[],
  decisionUrl: () => string,
  signingSecret: string,
): Promise<{ url: string; server: Server }> {
  let down = false;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'POST' && (req.url === '/_demo/down' || req.url === '/_demo/up')) {
        down = req.url === '/_demo/down';
        print(`[demo app] ${down ? 'down: answering 503 to every event' : 'up again'}`);
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ down }));
        return;
      }
      if (req.method !== 'POST' || req.url !== '/webhooks') {
        res.writeHead(404).end();
        return;
      }
      const verified = verifyForwardedEvent({ headers: req.headers, rawBody: Buffer.concat(chunks), secrets: [signingSecret] });
      if (!verified.verified) {
        print(`[demo app] refused a request that is not its sidecar's forward (${verified.reason}): 401`);
        res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: verified.reason }));
        return;
      }
      if (down) {
        res.writeHead(503).end();
        return;
      }
      const e = verified.event;
      const event: DemoAppEvent = { id: e.id, type: e.type, sequence: e.sequence ?? 0, data: e.data as Record<string, unknown>, headers: req.headers };
      received.push(event);
      const d = event.data;
      if (e.type === RECONCILED_EVENT_TYPE) {
        print(
          `[demo app] RECONCILED (signature verified: from the sidecar, read from the service's listing, not a service event) ${event.type}: ${String(d.notificationReason ?? '')} for ${String(d.customerTenantId ?? '?')} is still pending; ` +
            `send the notice, then: curl -s -X POST ${decisionUrl()}/v1/redec/consents/${String(d.redecConsentId ?? '<redecConsentId>')}/notification-evidence -H 'content-type: application/json' -d '{}'`,
        );
      } else {
        const who = d.userReference ?? d.customer_tenant_id ?? d.customerId;
        const action = d.action ?? d.notification_reason ?? d.status;
        print(`[demo app] verified event #${event.sequence} ${event.type}${action ? ` ${String(action)}` : ''}${who ? ` for ${String(who)}` : ''} (id ${event.id}; its sidecar's signature checked)`);
      }
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(new Error(`--app-listen ${formatHostPort(address.host, address.port)}: cannot listen (${err.code ?? err.message})`, { cause: err })),
    );
    server.listen(address.port, address.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return { url: `http://${formatHostPort(address.host, port)}/webhooks`, server };
}

export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}
