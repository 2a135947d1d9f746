import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../../src/observability/index.js';
import { startSimulator, type SimulatorHandle } from '../../src/simulator/index.js';
import { startTestSidecar, type TestSidecar } from '../helpers/sidecar.js';

export const SECRET = 'whsec_e2e_secret_0123456789';

/** What the app received from the sidecar. */
export interface AppDelivery {
  readonly headers: IncomingHttpHeaders;
  readonly raw: string;
  readonly at: number;
}

/** An app on loopback that can be taken down (its port closed) and brought back on the same port. */
export class App {
  readonly received: AppDelivery[] = [];
  private server: Server | undefined;
  port = 0;

  get url(): string {
    return `http://127.0.0.1:${this.port}/webhooks`;
  }

  async up(): Promise<void> {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        this.received.push({ headers: req.headers, raw: Buffer.concat(chunks).toString('utf8'), at: Date.now() });
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  async down(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }

  eventIds(): string[] {
    return this.received.map((r) => (JSON.parse(r.raw) as { id: string }).id);
  }
}

export interface Stack {
  readonly sim: SimulatorHandle;
  readonly sidecar: TestSidecar;
  readonly app: App;
  close(): Promise<void>;
}

/** Simulator ⇄ real sidecar (decision + webhook ingress) ⇄ app, all on loopback port 0. */
export async function startStack(options: { timeScale?: number; simulatorLogger?: Logger } = {}): Promise<Stack> {
  const app = new App();
  await app.up();
  const sim = await startSimulator({
    apiKey: 'e2e-key',
    ...(options.timeScale ? { timeScale: options.timeScale } : {}),
    ...(options.simulatorLogger ? { logger: options.simulatorLogger } : {}),
  });
  const sidecar = await startTestSidecar(sim.url, {
    'api-key': sim.apiKey,
    'webhook-listen': '127.0.0.1:0',
    'app-webhook-url': app.url,
    'webhook-secret': SECRET,
    'webhook-forward-timeout-ms': '2000',
  });
  const webhook = sidecar.handle.urls.webhook;
  if (!webhook) throw new Error('the sidecar did not start its webhook ingress');
  sim.registerWebhookEndpoint({ url: `${webhook}/webhooks`, secret: SECRET });
  return {
    sim,
    sidecar,
    app,
    async close() {
      await sim.close();
      await sidecar.close();
      await app.down();
    },
  };
}

/** Service-time gaps (minutes) between attempts 1→2, …, 7→8, per the document and our factor 2. */
export const SCHEDULE_MINUTES = [1, 2, 4, 8, 15, 15, 15];
