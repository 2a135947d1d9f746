import type { Command } from 'commander';

// Placeholder until the simulate command lands; it says so instead of pretending to work.
export function registerSimulate(program: Command): void {
  program
    .command('simulate')
    .description('(not built yet)')
    .allowUnknownOption()
    .action(() => {
      process.stderr.write('simulate: not available in this build yet\n');
      process.exitCode = 2;
    });
}
