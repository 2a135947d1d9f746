import { Command, CommanderError } from 'commander';
import { ConfigError } from '../config/index.js';
import { VERSION } from '../version.js';
import { registerCheck } from './check.js';
import { registerDemo } from './demo.js';
import { CliUsageError, EXIT } from './errors.js';
import { registerRedec } from './redec.js';
import { registerServe } from './serve.js';
import { registerSimulate } from './simulate.js';
import { refuseRepeatedOptions } from './spec-options.js';
import { registerWebhook } from './webhook.js';

/** The `consent-sidecar` program with every command registered. */
export function buildProgram(): Command {
  const program = new Command('consent-sidecar')
    .description('A fail-closed sidecar between an application and a consent service')
    .version(VERSION)
    // A short error with commander's "Did you mean" suggestion, not the whole help.
    .showHelpAfterError('(add --help for usage)')
    // serve's longest flag leaves its descriptions 34 columns of 80; commander would stop wrapping
    // below 40 and print 200-column lines. Set before the commands are added: they inherit it.
    .configureHelp({ minWidthToWrap: 30 })
    .exitOverride();
  registerServe(program);
  registerCheck(program);
  registerWebhook(program);
  registerRedec(program);
  registerSimulate(program);
  registerDemo(program);
  refuseRepeatedOptions(program);
  return program;
}

/** Runs the CLI; bad usage or configuration prints a message naming the flag, never a stack trace. */
export async function main(argv: readonly string[]): Promise<void> {
  const program = buildProgram();
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
