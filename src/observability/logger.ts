import { pino, type DestinationStream, type Logger } from 'pino';
import type { LogLevel } from './log-levels.js';
import { stdoutSink } from './stdout.js';

export type { Logger };

/**
 * JSON logs, one event per line on stdout (the process's non-blocking stdout unless a destination
 * is given). Anything that looks like a credential is redacted even if a caller slips it into a log
 * object by mistake.
 */
export function createLogger(level: LogLevel, destination?: DestinationStream, options: { service?: string } = {}): Logger {
  return pino(
    {
      level,
      base: { service: options.service ?? 'consent-sidecar' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: {
        paths: [
          'apiKey',
          'secret',
          'secrets',
          'signature',
          'authorization',
          '*.authorization',
          'headers.authorization',
          'headers["x-service-signature"]',
          'userReference',
        ],
        censor: '[redacted]',
      },
    },
    destination ?? stdoutSink(),
  );
}

/** The `service` field of the simulator's log lines: it stands for the consent service, not the sidecar. */
export const SIMULATOR_SERVICE_NAME = 'consent-service-simulator';

/** A logger that drops everything, for tests and library use. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
