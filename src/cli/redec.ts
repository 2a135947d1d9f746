import type { Command } from 'commander';

// Placeholder until the redec command lands; it says so instead of pretending to work.
export function registerRedec(program: Command): void {
  program
    .command('redec')
    .description('(not built yet)')
    .allowUnknownOption()
    .action(() => {
      process.stderr.write('redec: not available in this build yet\n');
      process.exitCode = 2;
    });
}
