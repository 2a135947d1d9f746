import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { formatHostPort, type ListenAddress } from '../lib/listen-address.js';

/** One event the demo app received from the sidecar. */
export interface DemoAppEvent {
  readonly id: string;
  readonly type: string;
  readonly sequence: number;
  readonly data: Record<string, unknown>;
  readonly headers: Record<string, string | string[] | undefined>;
}


/**
 * The demo app: accepts events that carry the sidecar's verification mark, and the reconciler's
 * events (marked reconciled, never verified), and prints each one. `POST /_demo/down` makes it
 * answer 503 (as an app that is down), `POST /_demo/up` brings it back.
 */
/** The demo's application: it prints each verified (or reconciled) event it gets, and can be told to go down. */
export async function startDemoApp(address: ListenAddress, print: (line: string) => void, received: DemoAppEvent[], decisionUrl: () => string): Promise<{ url: string; server: Server }> {
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
      const verified = req.headers['x-consent-sidecar-verified'] === 'v1';
      const reconciled = !verified && req.headers['x-consent-sidecar-reconciled'] === '1';
      if (req.method !== 'POST' || req.url !== '/webhooks' || !(verified || reconciled)) {
        res.writeHead(400).end();
        return;
      }
      if (down) {
        res.writeHead(503).end();
        return;
      }
      if (reconciled) {
        let event: DemoAppEvent;
        try {
          const parsed = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: string; type: string; data: Record<string, unknown> };
          event = { id: parsed.id, type: parsed.type, sequence: 0, data: parsed.data, headers: req.headers };
        } catch {
          res.writeHead(400).end();
          return;
        }
        received.push(event);
        const d = event.data;
        print(
          `[demo app] RECONCILED (from the sidecar, not a signed service event) ${event.type}: ${String(d.notificationReason ?? '')} for ${String(d.customerTenantId ?? '?')} is still pending; ` +
            `send the notice, then: curl -s -X POST ${decisionUrl()}/v1/redec/consents/${String(d.redecConsentId ?? '<redecConsentId>')}/notification-evidence -H 'content-type: application/json' -d '{}'`,
        );
        res.writeHead(200).end();
        return;
      }
      let event: DemoAppEvent;
      try {
        const parsed = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Omit<DemoAppEvent, 'headers'>;
        event = { ...parsed, headers: req.headers };
      } catch {
        res.writeHead(400).end();
        return;
      }
      received.push(event);
      const who = event.data.userReference ?? event.data.customer_tenant_id ?? event.data.customerId;
      const action = event.data.action ?? event.data.notification_reason ?? event.data.status;
      print(`[demo app] verified event #${event.sequence} ${event.type}${action ? ` ${String(action)}` : ''}${who ? ` for ${String(who)}` : ''} (id ${event.id})`);
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
