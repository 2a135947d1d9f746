import type { Command } from 'commander';
import { LOG_LEVELS, type LogLevel } from '../config/index.js';
import { parseListenAddress, type ListenAddress } from '../lib/listen-address.js';
import { createLogger, SIMULATOR_SERVICE_NAME, type Logger } from '../observability/index.js';
import {
  DEFAULT_DECISION_LIFETIME_MS,
  DEFAULT_FIXTURE,
  DEFAULT_SIMULATOR_API_KEY,
  DEFAULT_WEBHOOK_ATTEMPT_TIMEOUT_MS,
  EVENT_TYPES,
  SimulatorError,
  startSimulator,
  type SimulatorHandle,
  type WebhookEndpointInput,
} from '../simulator/index.js';
import { CliUsageError } from './errors.js';

/** Where `simulate` listens by default. */
export const DEFAULT_SIMULATOR_LISTEN = '127.0.0.1:7800';

/** Collects every problem with the flags, each naming its flag, and throws them together. */
export class FlagProblems {
  private readonly problems: string[] = [];

  add(flag: string, message: string): void {
    this.problems.push(`${flag}: ${message}`);
  }

  listen(flag: string, value: string): ListenAddress {
    const parsed = parseListenAddress(value);
    if (typeof parsed === 'string') {
      this.add(flag, parsed);
      return { host: '127.0.0.1', port: 0 };
    }
    return parsed;
  }

  number(flag: string, value: string | undefined, fallback: number, min: number, integer = true): number {
    if (value === undefined) return fallback;
    const n = Number(value.trim());
    if (value.trim() === '' || !Number.isFinite(n) || n < min || (integer && !Number.isSafeInteger(n))) {
      const bound = min === Number.MIN_VALUE ? '> 0' : `>= ${min}`;
      this.add(flag, `must be ${integer ? 'an integer' : 'a number'} ${bound}, got "${value}"`);
      return fallback;
    }
    return n;
  }

  logLevel(value: string): LogLevel {
    if ((LOG_LEVELS as readonly string[]).includes(value)) return value as LogLevel;
    this.add('--log-level', `must be one of ${LOG_LEVELS.join(', ')}, got "${value}"`);
    return 'info';
  }

  throwIfAny(): void {
    if (this.problems.length > 0) throw new CliUsageError(this.problems.join('\n  '));
  }
}

interface SimulateFlags {
  listen: string;
  apiKey: string;
  fixtures?: string;
  timeScale?: string;
  decisionLifetimeMs?: string;
  latencyMs?: string;
  webhookEndpoint?: string;
  webhookSecret?: string;
  webhookHeader?: string;
  webhookTypes?: string;
  webhookAttemptTimeoutMs?: string;
  controlToken?: string;
  logLevel: string;
  printFixture?: boolean;
}

/** Turns `simulate` flags into simulator options; throws {@link CliUsageError} naming each bad flag. */
export function simulatorOptionsFromFlags(flags: SimulateFlags, logger?: Logger) {
  const p = new FlagProblems();
  const listen = p.listen('--listen', flags.listen);
  const timeScale = p.number('--time-scale', flags.timeScale, 1, Number.MIN_VALUE, false);
  const decisionLifetimeMs = p.number('--decision-lifetime-ms', flags.decisionLifetimeMs, DEFAULT_DECISION_LIFETIME_MS, 1);
  const latencyMs = p.number('--latency-ms', flags.latencyMs, 0, 0);
  const webhookAttemptTimeoutMs = p.number('--webhook-attempt-timeout-ms', flags.webhookAttemptTimeoutMs, DEFAULT_WEBHOOK_ATTEMPT_TIMEOUT_MS, 1);
  const logLevel = p.logLevel(flags.logLevel);
  if (flags.apiKey === '' || /\s/.test(flags.apiKey)) p.add('--api-key', 'must be a non-empty token without spaces');
  const webhookEndpoints: WebhookEndpointInput[] = [];
  if (flags.webhookEndpoint === undefined) {
    for (const f of ['webhookSecret', 'webhookHeader', 'webhookTypes'] as const) {
      if (flags[f] !== undefined) p.add(`--${f.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`, 'needs --webhook-endpoint');
    }
  } else if (flags.webhookSecret === undefined) {
    p.add('--webhook-secret', 'is required with --webhook-endpoint');
  } else {
    const types = flags.webhookTypes?.split(',').map((t) => t.trim()).filter(Boolean);
    for (const t of types ?? []) {
      if (!(EVENT_TYPES as readonly string[]).includes(t)) p.add('--webhook-types', `unknown event type "${t}"`);
    }
    webhookEndpoints.push({
      url: flags.webhookEndpoint,
      secret: flags.webhookSecret,
      ...(types ? { types } : {}),
      ...(flags.webhookHeader !== undefined ? { header: flags.webhookHeader } : {}),
    });
  }
  p.throwIfAny();
  return {
    host: listen.host,
    port: listen.port,
    apiKey: flags.apiKey,
    ...(flags.fixtures !== undefined ? { fixtures: flags.fixtures } : {}),
    timeScale,
    decisionLifetimeMs,
    latencyMs,
    webhookAttemptTimeoutMs,
    webhookEndpoints,
    ...(flags.controlToken !== undefined ? { controlToken: flags.controlToken } : {}),
    logger: logger ?? createLogger(logLevel, undefined, { service: SIMULATOR_SERVICE_NAME }),
  };
}

/** Starts a simulator, turning its option, fixture and listen errors into messages that name the flag. */
export async function startSimulatorForCli(options: Parameters<typeof startSimulator>[0], listenFlag = '--listen'): Promise<SimulatorHandle> {
  try {
    return await startSimulator(options);
  } catch (err) {
    if (err instanceof SimulatorError) {
      const flag = err.code === 'ERR_SIMULATOR_FIXTURE_INVALID' ? '--fixtures' : err.code === 'ERR_SIMULATOR_INVALID_INPUT' ? '--webhook-endpoint' : 'simulate';
      throw new CliUsageError(`${flag}: ${err.message}`);
    }
    if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE' || (err as NodeJS.ErrnoException).code === 'EACCES') {
      const where = `${options?.host ?? '127.0.0.1'}:${options?.port ?? 0}`;
      throw new Error(`${listenFlag} ${where}: cannot listen (${(err as NodeJS.ErrnoException).code})`, { cause: err });
    }
    throw err;
  }
}

/** Runs `close` on SIGINT/SIGTERM, then exits; a second signal exits at once. */
export function closeOnSignals(logger: Logger, close: () => Promise<void>): void {
  let signals = 0;
  const stop = (signal: NodeJS.Signals): void => {
    if (++signals > 1) process.exit(1);
    logger.info({ event: 'shutdown', signal }, 'stopping');
    close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

export function registerSimulate(program: Command): void {
  program
    .command('simulate')
    .description('run the consent service simulator alone: decisions, signed webhooks with the retry schedule, REDEC listing')
    .option('--listen <host:port>', 'where the simulator listens', DEFAULT_SIMULATOR_LISTEN)
    .option('--api-key <key>', 'the Bearer key /v1/* requires', DEFAULT_SIMULATOR_API_KEY)
    .option('--fixtures <path>', 'JSON fixture (customers, Flows, consent states); default: the shipped demo data')
    .option('--time-scale <n>', 'service time runs n times faster for webhook retries (60: a minute lasts a second)', '1')
    .option('--decision-lifetime-ms <ms>', 'an ALLOW is valid at most this long', String(DEFAULT_DECISION_LIFETIME_MS))
    .option('--latency-ms <ms>', 'latency added to every check', '0')
    .option('--webhook-endpoint <url>', 'register this endpoint for deliveries')
    .option('--webhook-secret <whsec_…>', 'its signing secret (required with --webhook-endpoint)')
    .option('--webhook-header <"Name: value">', "its optional custom header (the portal's)")
    .option('--webhook-types <a,b>', 'event types it subscribes to, comma-separated (default: all)')
    .option('--webhook-attempt-timeout-ms <ms>', 'deadline of one delivery attempt', String(DEFAULT_WEBHOOK_ATTEMPT_TIMEOUT_MS))
    .option('--control-token <token>', 'require this value in x-simulator-control-token on /_simulator/*')
    .option('--log-level <level>', `one of ${LOG_LEVELS.join(', ')}`, 'info')
    .option('--print-fixture', 'print the shipped default fixture as JSON (a start for --fixtures) and exit')
    .action(async (flags: SimulateFlags) => {
      if (flags.printFixture) {
        process.stdout.write(`${JSON.stringify(DEFAULT_FIXTURE, null, 2)}\n`);
        return;
      }
      const options = simulatorOptionsFromFlags(flags);
      const sim = await startSimulatorForCli(options);
      options.logger.info(
        {
          event: 'simulate_ready',
          url: sim.url,
          check: `${sim.url}/v1/authorization/check`,
          notificationRequirements: `${sim.url}/v1/redec/notification-requirements?status=pending`,
          control: `${sim.url}/_simulator/state`,
          fixtures: flags.fixtures ?? 'default',
          webhookEndpoints: options.webhookEndpoints.map((e) => e.url),
          timeScale: options.timeScale,
        },
        `simulator serving at ${sim.url}`,
      );
      closeOnSignals(options.logger, () => sim.close());
    });
}
