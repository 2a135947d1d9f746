import type { Command } from 'commander';
import { loadServeConfig, SERVE_OPTIONS } from '../config/index.js';
import { createLogger, stdoutSink } from '../observability/index.js';
import type { SidecarHandle } from '../assembly/sidecar.js';
import { addSpecOptions, rawFlags, unknownVariableWarnings } from './spec-options.js';

export function registerServe(program: Command): void {
  const cmd = program
    .command('serve')
    .description('run the sidecar: decision API, webhook ingress, admin (metrics and probes)')
    .action(async () => {
      const config = loadServeConfig(rawFlags(cmd, SERVE_OPTIONS));
      const logger = createLogger(config.logLevel);
      for (const msg of unknownVariableWarnings()) logger.warn({ event: 'unknown_variable' }, msg);
      // The signals are ours before the sidecar says it started: a SIGTERM that follows the
      // 'started' line at once (a rollout, a test) drains and exits 0, never node's default kill.
      let sidecar: SidecarHandle | undefined;
      let pending: NodeJS.Signals | undefined;
      let signals = 0;
      const stop = (signal: NodeJS.Signals): void => {
        if (++signals > 1) {
          logger.warn({ event: 'forced_exit', signal }, 'second signal: exiting now');
          process.exit(1);
        }
        if (sidecar === undefined) {
          pending = signal;
          return;
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
      // The sidecar (the listeners, Redis) is loaded when serve runs, not for every command.
      const { startSidecar } = await import('../assembly/sidecar.js');
      sidecar = await startSidecar(config, { logger });
      if (pending !== undefined) {
        signals--;
        stop(pending);
      }
    });
  addSpecOptions(cmd, SERVE_OPTIONS);
}
