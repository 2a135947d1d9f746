import type { Command } from 'commander';
import { REDEC_LISTING_OPTIONS, resolveRedecListingBounds, resolveRedecListingFields, resolveUpstreamConfig, UPSTREAM_OPTIONS } from '../config/index.js';
import { DEFAULT_REDEC_PAGE_LIMIT, formatTable, listNotificationRequirements, RedecError, type NotificationRequirementItem } from '../redec/index.js';
import { CliUsageError, EXIT } from './errors.js';
import { addSpecOptions, ONE_SHOT_UPSTREAM_MEANING, rawFlags, warnUnknownVariables } from './spec-options.js';

const OUTPUTS = ['json', 'table'] as const;

interface PendingFlags {
  output: string;
  status: string;
  limit: string;
}

export function registerRedec(program: Command): void {
  const redec = program.command('redec').description('REDEC notification obligations');
  const pending = redec
    .command('pending')
    .description('list pending REDEC notification obligations, all pages (JSON lines or a table)')
    .option('--output <format>', `${OUTPUTS.join(' or ')}`, 'json')
    .option('--status <status>', 'status to list', 'pending')
    .option('--limit <n>', 'page size asked of the service', String(DEFAULT_REDEC_PAGE_LIMIT))
    .action(async (flags: PendingFlags) => {
      warnUnknownVariables();
      const problems: string[] = [];
      if (!(OUTPUTS as readonly string[]).includes(flags.output)) problems.push(`--output: must be json or table, got "${flags.output}"`);
      const limit = /^\d{1,6}$/.test(flags.limit) ? Number(flags.limit) : Number.NaN;
      if (!(limit >= 1)) problems.push(`--limit: must be a positive integer, got "${flags.limit}"`);
      if (flags.status.trim() === '') problems.push('--status: must not be empty');
      if (problems.length > 0) throw new CliUsageError(problems.join('\n  '));
      const upstream = resolveUpstreamConfig(rawFlags(pending, UPSTREAM_OPTIONS));
      const fields = resolveRedecListingFields(rawFlags(pending, REDEC_LISTING_OPTIONS));
      // The same bounds as serve's reconciler: a listing past them ends with exit 1.
      const bounds = resolveRedecListingBounds(rawFlags(pending, REDEC_LISTING_OPTIONS));
      const all: NotificationRequirementItem[] = [];
      let said = false;
      // Which member held the records, once, on stderr (stdout stays JSON lines or the table).
      const onItemsField = (field: string): void => {
        if (said || field === 'items') return;
        said = true;
        process.stderr.write(`consent-sidecar: redec pending: records read from "${field}"\n`);
      };
      try {
        for await (const page of listNotificationRequirements(upstream, { status: flags.status, limit, fields, bounds, onItemsField })) {
          // JSON lines stream as pages arrive; a table needs every row for its widths.
          if (flags.output === 'json') for (const item of page) process.stdout.write(`${JSON.stringify(item)}\n`);
          else all.push(...page);
        }
      } catch (err) {
        if (!(err instanceof RedecError)) throw err;
        process.stderr.write(`consent-sidecar: redec pending: ${err.message} (${err.code})\n`);
        process.exitCode = EXIT.failure;
        return;
      }
      if (flags.output === 'table') process.stdout.write(all.length > 0 ? `${formatTable(all)}\n` : 'no obligations\n');
    });
  addSpecOptions(pending, UPSTREAM_OPTIONS, {
    ...ONE_SHOT_UPSTREAM_MEANING,
    'upstream-timeout-ms': 'deadline of each page request',
  });
  addSpecOptions(pending, REDEC_LISTING_OPTIONS);
}
