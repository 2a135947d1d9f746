import { randomBytes } from 'node:crypto';
import { basename, isAbsolute, relative } from 'node:path';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Command } from 'commander';
import { LOG_LEVELS, loadServeConfig, type LogLevel } from '../config/index.js';
import { formatHostPort, type ListenAddress } from '../lib/listen-address.js';
import { createLogger, SIMULATOR_SERVICE_NAME, silentLogger, type Logger } from '../observability/index.js';
import type { SidecarHandle } from '../sidecar.js';
import { DEFAULT_SIMULATOR_API_KEY, type SimulatorHandle } from '../simulator/index.js';
import { closeOnSignals, DEFAULT_SIMULATOR_LISTEN, FlagProblems, startSimulatorForCli } from './simulate.js';

/** One event the demo app received from the sidecar. */
export interface DemoAppEvent {
  readonly id: string;
  readonly type: string;
  readonly sequence: number;
  readonly data: Record<string, unknown>;
  readonly headers: Record<string, string | string[] | undefined>;
}

export interface DemoOptions {
  readonly listen: ListenAddress;
  readonly webhookListen: ListenAddress;
  readonly adminListen: ListenAddress;
  readonly simulatorListen: ListenAddress;
  readonly appListen: ListenAddress;
  /** Service time compression of the simulator's webhook retries. */
  readonly timeScale: number;
  /** Sidecar and simulator log level (JSON logs on stdout). */
  readonly logLevel: LogLevel;
  /** Where the demo app's lines and the guide go. */
  readonly print: (line: string) => void;
  readonly logger?: Logger;
  /** The simulator's logger (its lines say `"service":"consent-service-simulator"`). */
  readonly simulatorLogger?: Logger;
  /** The sidecar's `--redec-reconcile-interval-ms` in the demo; default {@link DEMO_RECONCILE_INTERVAL_MS}. */
  readonly reconcileIntervalMs?: number;
  /** The sidecar's `--redec-reconcile-grace-ms` in the demo; default {@link DEMO_RECONCILE_GRACE_MS}. */
  readonly reconcileGraceMs?: number;
}

/** The demo reconciles every 5 s with a 20 s grace, so the REDEC story plays out in under a minute. */
export const DEMO_RECONCILE_INTERVAL_MS = 5000;
export const DEMO_RECONCILE_GRACE_MS = 20_000;

export interface DemoHandle {
  readonly simulator: SimulatorHandle;
  readonly sidecar: SidecarHandle;
  /** Where the sidecar forwards verified events. */
  readonly appUrl: string;
  /** Events the demo app received, in arrival order. */
  readonly received: readonly DemoAppEvent[];
  /** What to try, as printed. */
  readonly guide: string;
  close(): Promise<void>;
}

/**
 * The demo app: accepts events that carry the sidecar's verification mark, and the reconciler's
 * events (marked reconciled, never verified), and prints each one. `POST /_demo/down` makes it
 * answer 503 (as an app that is down), `POST /_demo/up` brings it back.
 */
async function startDemoApp(address: ListenAddress, print: (line: string) => void, received: DemoAppEvent[], decisionUrl: () => string): Promise<{ url: string; server: Server }> {
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

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

/**
 * How to run this CLI again from the same place: `node dist/cli.js` after `npm ci && npm run build`
 * (the bin is not on PATH then), `consent-sidecar` when installed as a package.
 */
export function cliCommand(argv1: string | undefined = process.argv[1], cwd = process.cwd()): string {
  if (argv1 && basename(argv1) === 'consent-sidecar') return 'consent-sidecar';
  if (argv1 && basename(argv1) === 'cli.js') {
    const rel = relative(cwd, argv1);
    return `node ${rel.startsWith('..') || isAbsolute(rel) ? argv1 : rel}`;
  }
  // From source (tsx) or embedded: the built form, which is what runs after npm ci && npm run build.
  return 'node dist/cli.js';
}

function guideFor(decision: string, sim: SimulatorHandle, webhook: string | null, admin: string, appUrl: string, secret: string, webhookUrl: string | null, reconcile: { intervalMs: number; graceMs: number }): string {
  const cli = cliCommand();
  const check = (user: string, key: string): string =>
    `curl -s -i -X POST ${decision}/v1/authorization/check -H 'content-type: application/json' -d '{"userReference":"${user}","configKey":"${key}"}'`;
  const control = (path: string, body: string): string =>
    `curl -s -X POST ${sim.url}/_simulator/${path} -H 'content-type: application/json' -d '${body}'`;
  const lines = [
    'consent-sidecar demo is running (Ctrl-C stops it):',
    `  decision API   ${decision}   (your app calls this, no key needed)`,
    webhook
      ? `  webhook in     ${webhook}/webhooks   (the simulator sends signed events here)`
      : '  webhook in     (not available in this build: revocations will not arrive as webhooks)',
    `  admin          ${admin}/metrics  ${admin}/readyz`,
    `  simulator      ${sim.url}   (the consent service; API key ${sim.apiKey})`,
    `  webhook secret ${secret}   (the simulator signs with it; the sidecar verifies with it)`,
    `  demo app       ${appUrl}   (prints every verified event below)`,
    '',
    'ALLOW (run it twice: the second answer says x-consent-decision-source: cache):',
    `  ${check('alice', 'marketing-email')}`,
    'Evaluated denial (bob revoked his consent; the answer names the configKey):',
    `  ${check('bob', 'marketing-email')}`,
    'Pre-evaluation denials (a configuration or reference problem; the answer has a reason):',
    `  customer_not_found:          ${check('nobody', 'marketing-email')}`,
    `  config_not_published:        ${check('alice', 'loyalty-program')}`,
    `  ambiguous_config:            ${check('alice', 'onboarding-bundle')}`,
    `  config_material_unavailable: ${check('alice', 'partner-sharing')}`,
    '',
    'Revoke alice\'s consent at the service: the revocation arrives below as a verified webhook,',
    'purges her cached ALLOW, and the next check is DENY:',
    `  ${control('consents/revoke', '{"userReference":"alice","configKey":"marketing-email"}')}`,
    `  ${check('alice', 'marketing-email')}`,
    'Grant it again (for an hour), and purge the cache by hand:',
    `  ${control('consents/grant', '{"userReference":"alice","configKey":"marketing-email","ttlMs":3600000}')}`,
    `  curl -s -X DELETE '${decision}/sidecar/cache?userReference=alice'`,
    'Make the service fail for the next 3 checks (the sidecar answers 503, fail-closed):',
    `  curl -s -X PUT ${sim.url}/_simulator/faults -H 'content-type: application/json' -d '{"status":503,"count":3}'`,
    'REDEC obligations the tenant still has to notify (after a credit-report grant or revoke):',
    `  ${control('consents/revoke', '{"userReference":"alice","configKey":"credit-report"}')}`,
    `  ${cli} redec pending --upstream-url ${sim.url} --api-key ${sim.apiKey} --output table`,
    `A lost REDEC notification, recovered by the reconciler (it lists pending obligations every ${reconcile.intervalMs / 1000} s and`,
    `hands the app any still pending ${reconcile.graceMs / 1000} s after it first saw it): take the demo app down, grant a`,
    'REDEC consent (its redec.notification.required deliveries get 503 until the service gives up: watch',
    `them turn terminal in ${sim.url}/_simulator/deliveries), bring the app up, and wait for a RECONCILED line:`,
    `  curl -s -X POST ${new URL(appUrl).origin}/_demo/down`,
    `  ${control('consents/grant', '{"userReference":"carol","configKey":"credit-report","ttlMs":3600000}')}`,
    `  curl -s -X POST ${new URL(appUrl).origin}/_demo/up`,
    'Then register the evidence through the sidecar as the RECONCILED line says: the obligation leaves',
    `the listing and is not handed again (${admin}/metrics: consent_sidecar_redec_pending_obligations).`,
    'The same check from the command line (exit 0 ALLOW, 1 DENY, 2 no decision):',
    `  ${cli} check --via ${decision} --user-reference alice --config-key marketing-email`,
    'Make the simulator send a signed event of any type, then replay it (the sidecar answers the',
    'replay as a duplicate and does not forward it again):',
    `  ${cli} webhook trigger consent_action.created --simulator ${sim.url} --data '{"userReference":"carol","configKey":"marketing-email","action":"revoke"}'`,
    `  ${cli} webhook resend <id printed above> --simulator ${sim.url}`,
    ...(webhookUrl
      ? [
          'Sign a delivery yourself with the secret above and send it to the sidecar (sign prints the',
          'headers, then the curl line, which the last command runs):',
          `  echo '{"id":"evt_by_hand","sequence":1,"type":"consent_action.created","occurredAt":${Date.now()},"data":{}}' > event.json`,
          `  ${cli} webhook sign --secret ${secret} --body-file event.json --curl ${webhookUrl} | tail -n 1 | sh`,
        ]
      : []),
    `Webhook deliveries and their attempts: curl -s ${sim.url}/_simulator/deliveries`,
  ];
  return lines.join('\n');
}

/**
 * Starts simulator, sidecar and demo app on loopback, and registers the sidecar's webhook ingress at
 * the simulator with a fresh secret. Everything is closed by `close()`.
 */
export async function startDemo(options: DemoOptions): Promise<DemoHandle> {
  const logger = options.logger ?? createLogger(options.logLevel);
  const received: DemoAppEvent[] = [];
  const cleanups: (() => Promise<void>)[] = [];
  const close = async (): Promise<void> => {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
  };
  try {
    const simulator = await startSimulatorForCli({
      host: options.simulatorListen.host,
      port: options.simulatorListen.port,
      apiKey: DEFAULT_SIMULATOR_API_KEY,
      timeScale: options.timeScale,
      logger: options.simulatorLogger ?? (options.logger ? logger.child({ component: 'simulator' }) : createLogger(options.logLevel, undefined, { service: SIMULATOR_SERVICE_NAME })),
    }, '--simulator-listen');
    cleanups.push(() => simulator.close());
    let decisionUrl = '';
    const app = await startDemoApp(options.appListen, options.print, received, () => decisionUrl);
    cleanups.push(() => closeServer(app.server));
    // A fresh secret per run: it lives only between the two processes of this demo.
    const secret = `whsec_${randomBytes(24).toString('base64url')}`;
    const hostPort = (a: ListenAddress): string => formatHostPort(a.host, a.port);
    const config = loadServeConfig(
      {
        'upstream-url': simulator.url,
        'api-key': simulator.apiKey,
        listen: hostPort(options.listen),
        'webhook-listen': hostPort(options.webhookListen),
        'admin-listen': hostPort(options.adminListen),
        'app-webhook-url': app.url,
        'webhook-secret': [secret],
        'log-level': options.logLevel,
        'shutdown-timeout-ms': '1000',
        'redec-reconcile-interval-ms': String(options.reconcileIntervalMs ?? DEMO_RECONCILE_INTERVAL_MS),
        'redec-reconcile-grace-ms': String(options.reconcileGraceMs ?? DEMO_RECONCILE_GRACE_MS),
      },
      {},
    );
    // Loaded here, not at the top: every CLI run registers this command, few run it (see serve.ts).
    const { startSidecar } = await import('../sidecar.js');
    const sidecar = await startSidecar(config, { logger });
    cleanups.push(() => sidecar.close());
    decisionUrl = sidecar.urls.decision;
    if (sidecar.urls.webhook) {
      simulator.registerWebhookEndpoint({ url: `${sidecar.urls.webhook}${config.webhooks?.path ?? '/webhooks'}`, secret });
    }
    const webhookUrl = sidecar.urls.webhook ? `${sidecar.urls.webhook}${config.webhooks?.path ?? '/webhooks'}` : null;
    const reconcile = config.redecReconcile ?? { intervalMs: 0, graceMs: 0 };
    const guide = guideFor(sidecar.urls.decision, simulator, sidecar.urls.webhook, sidecar.urls.admin, app.url, secret, webhookUrl, reconcile);
    return { simulator, sidecar, appUrl: app.url, received, guide, close };
  } catch (err) {
    await close();
    throw err;
  }
}

interface DemoFlags {
  listen: string;
  webhookListen: string;
  adminListen: string;
  simulatorListen: string;
  appListen: string;
  timeScale: string;
  logLevel: string;
}

export function registerDemo(program: Command): void {
  program
    .command('demo')
    .description('simulator + sidecar + a demo app on this machine; prints what to try')
    .option('--listen <host:port>', 'sidecar decision API', '127.0.0.1:7700')
    .option('--webhook-listen <host:port>', 'sidecar webhook ingress', '127.0.0.1:7701')
    .option('--admin-listen <host:port>', 'sidecar metrics and probes', '127.0.0.1:7702')
    .option('--simulator-listen <host:port>', 'the simulated consent service', DEFAULT_SIMULATOR_LISTEN)
    .option('--app-listen <host:port>', 'the demo app receiving forwarded events', '127.0.0.1:8080')
    .option('--time-scale <n>', 'webhook retry time compression (60: a minute of backoff lasts a second)', '60')
    .option('--log-level <level>', `sidecar and simulator JSON logs: one of ${LOG_LEVELS.join(', ')}`, 'warn')
    .action(async (flags: DemoFlags) => {
      const p = new FlagProblems();
      const options: DemoOptions = {
        listen: p.listen('--listen', flags.listen),
        webhookListen: p.listen('--webhook-listen', flags.webhookListen),
        adminListen: p.listen('--admin-listen', flags.adminListen),
        simulatorListen: p.listen('--simulator-listen', flags.simulatorListen),
        appListen: p.listen('--app-listen', flags.appListen),
        timeScale: p.number('--time-scale', flags.timeScale, 60, Number.MIN_VALUE, false),
        logLevel: p.logLevel(flags.logLevel),
        print: (line) => process.stdout.write(`${line}\n`),
      };
      p.throwIfAny();
      const logger = options.logLevel === 'silent' ? silentLogger() : createLogger(options.logLevel);
      const simulatorLogger = options.logLevel === 'silent' ? silentLogger() : createLogger(options.logLevel, undefined, { service: SIMULATOR_SERVICE_NAME });
      const demo = await startDemo({ ...options, logger, simulatorLogger });
      process.stdout.write(`${demo.guide}\n\n`);
      closeOnSignals(logger, () => demo.close());
    });
}
