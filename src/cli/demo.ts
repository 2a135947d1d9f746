import type { Command } from 'commander';

// Placeholder until the demo command lands; it says so instead of pretending to work.
export function registerDemo(program: Command): void {
  program
    .command('demo')
    .description('(not built yet)')
    .allowUnknownOption()
    .action(() => {
      process.stderr.write('demo: not available in this build yet\n');
      process.exitCode = 2;
    });
}
