import { CommanderError, type Command } from 'commander';
import { ConfigError } from '../config/index.js';
import { CliUsageError, EXIT } from './errors.js';
import { newProgram } from './new-program.js';
import { registerServe } from './serve.js';
import { refuseRepeatedOptions } from './spec-options.js';


/**
 * The program for these arguments. `serve` (what a pod runs) gets a program of its own command
 * alone, so it loads none of the others' modules (the simulator, the demo, the one-shot commands'
 * clients): a pod pays for what it runs. Anything else gets every command.
 */
async function programFor(argv: readonly string[]): Promise<Command> {
  if (argv[2] === 'serve') {
    const program = newProgram();
    registerServe(program);
    refuseRepeatedOptions(program);
    return program;
  }
  return (await import('./program.js')).buildProgram();
}

/** Runs the CLI; bad usage or configuration prints a message naming the flag, never a stack trace. */
export async function main(argv: readonly string[]): Promise<void> {
  const program = await programFor(argv);
  try {
    await program.parseAsync([...argv]);
  } catch (err) {
    if (err instanceof CommanderError) {
      // commander already printed its message (help, version, unknown or missing option).
      process.exitCode = err.exitCode === 0 ? EXIT.ok : EXIT.usage;
    } else if (err instanceof ConfigError) {
      process.stderr.write(`consent-sidecar: ${err.message}\n`);
      process.exitCode = EXIT.usage;
    } else if (err instanceof CliUsageError) {
      process.stderr.write(`consent-sidecar: ${err.message}\n`);
      process.exitCode = EXIT.usage;
    } else {
      process.stderr.write(`consent-sidecar: ${(err as Error)?.message ?? String(err)}\n`);
      process.exitCode = EXIT.failure;
    }
  }
}
