import type { Command } from 'commander';

// Placeholder until the webhook command lands; it says so instead of pretending to work.
export function registerWebhook(program: Command): void {
  program
    .command('webhook')
    .description('(not built yet)')
    .allowUnknownOption()
    .action(() => {
      process.stderr.write('webhook: not available in this build yet\n');
      process.exitCode = 2;
    });
}
