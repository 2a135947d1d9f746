import { randomBytes } from 'node:crypto';
import type { Command } from 'commander';
import { LOG_LEVELS, loadServeConfig, type LogLevel } from '../config/index.js';
import { formatHostPort, type ListenAddress } from '../lib/listen-address.js';
import { createLogger, SIMULATOR_SERVICE_NAME, silentLogger, type Logger } from '../observability/index.js';
import type { SidecarHandle } from '../assembly/sidecar.js';
import { DEFAULT_SIMULATOR_API_KEY, type SimulatorHandle } from '../simulator/index.js';
import { closeServer, startDemoApp, type DemoAppEvent } from './demo-app.js';
import { cliCommand, guideFor } from './demo-guide.js';
import { closeOnSignals, DEFAULT_SIMULATOR_LISTEN, FlagProblems, startSimulatorForCli } from './simulate.js';

export type { DemoAppEvent };
export { cliCommand };

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
    // Fresh secrets per run: the service's (between the simulator and the sidecar) and the pod's
    // (the sidecar signs what it forwards with it; the demo app verifies).
    const secret = `whsec_${randomBytes(24).toString('base64url')}`;
    const appSigningSecret = randomBytes(32).toString('base64url');
    const app = await startDemoApp(options.appListen, options.print, received, () => decisionUrl, appSigningSecret);
    cleanups.push(() => closeServer(app.server));
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
        'app-signing-secret': [appSigningSecret],
        'log-level': options.logLevel,
        'shutdown-timeout-ms': '1000',
        'redec-reconcile-interval-ms': String(options.reconcileIntervalMs ?? DEMO_RECONCILE_INTERVAL_MS),
        'redec-reconcile-grace-ms': String(options.reconcileGraceMs ?? DEMO_RECONCILE_GRACE_MS),
      },
      {},
    );
    // Loaded here, not at the top: every CLI run registers this command, few run it (see serve.ts).
    const { startSidecar } = await import('../assembly/sidecar.js');
    const sidecar = await startSidecar(config, { logger });
    cleanups.push(() => sidecar.close());
    decisionUrl = sidecar.urls.decision;
    if (sidecar.urls.webhook) {
      simulator.registerWebhookEndpoint({ url: `${sidecar.urls.webhook}${config.webhooks?.path ?? '/webhooks'}`, secret });
    }
    const webhookUrl = sidecar.urls.webhook ? `${sidecar.urls.webhook}${config.webhooks?.path ?? '/webhooks'}` : null;
    const reconcile = config.redecReconcile ?? { intervalMs: 0, graceMs: 0 };
    const guide = guideFor(sidecar.urls.decision, simulator, sidecar.urls.webhook, sidecar.urls.admin, app.url, secret, webhookUrl, reconcile, options.timeScale);
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
