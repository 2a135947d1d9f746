import type { Command } from 'commander';
import { loadServeConfig, SERVE_OPTIONS } from '../config/index.js';
import { createLogger, stdoutSink } from '../observability/index.js';
import { addSpecOptions, rawFlags, unknownVariableWarnings } from './spec-options.js';

export function registerServe(program: Command): void {
  const cmd = program
    .command('serve')
    .description('run the sidecar: decision API, webhook ingress, admin (metrics and probes)')
    .action(async () => {
      const config = loadServeConfig(rawFlags(cmd, SERVE_OPTIONS));
      const logger = createLogger(config.logLevel);
      for (const msg of unknownVariableWarnings()) logger.warn({ event: 'unknown_variable' }, msg);
      // The sidecar (express, the listeners, Redis) is loaded when serve runs, not for every command:
      // a one-shot command (check, redec pending, webhook sign) starts in a fraction of the time.
      const { startSidecar } = await import('../sidecar.js');
      const sidecar = await startSidecar(config, { logger });
      let signals = 0;
      const stop = (signal: NodeJS.Signals): void => {
        if (++signals > 1) {
          logger.warn({ event: 'forced_exit', signal }, 'second signal: exiting now');
          process.exit(1);
        }
        logger.info({ event: 'shutdown', signal }, 'draining in-flight requests');
        // The last lines go out if stdout takes them within a second; never waited for beyond.
        sidecar.close().then(
          () => stdoutSink().drain(1000).then(() => process.exit(0)),
          (err: unknown) => {
            logger.error({ event: 'shutdown_failed', err }, 'shutdown failed');
            void stdoutSink().drain(1000).then(() => process.exit(1));
          },
        );
      };
      process.on('SIGTERM', stop);
      process.on('SIGINT', stop);
    });
  addSpecOptions(cmd, SERVE_OPTIONS);
}
