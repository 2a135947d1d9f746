import type { Command } from 'commander';
import { request } from 'undici';
import { EVENT_TYPES } from '../simulator/index.js';
import { CliUsageError, EXIT } from './errors.js';
import { DEFAULT_SIMULATOR_LISTEN } from './simulate.js';

interface SimulatorFlags {
  simulator: string;
  controlToken?: string;
}

/** POSTs to the simulator's control surface; prints its JSON answer; exit 0, 1 on its error, 2 unreachable. */
async function control(flags: SimulatorFlags, path: string, body: unknown): Promise<void> {
  let base: URL;
  try {
    base = new URL(flags.simulator);
  } catch {
    throw new CliUsageError(`--simulator: not a valid URL: "${flags.simulator}"`);
  }
  let status: number;
  let text: string;
  try {
    const res = await request(new URL(path, base), {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(flags.controlToken !== undefined ? { 'x-simulator-control-token': flags.controlToken } : {}),
      },
      body: JSON.stringify(body ?? {}),
      signal: AbortSignal.timeout(10_000),
    });
    status = res.statusCode;
    text = await res.body.text();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).name;
    process.stderr.write(`consent-sidecar: could not reach the simulator at ${base.origin} (${code}); start it with simulate or demo\n`);
    process.exitCode = EXIT.usage;
    return;
  }
  if (status >= 200 && status < 300) {
    process.stdout.write(`${text}\n`);
    return;
  }
  process.stderr.write(`consent-sidecar: the simulator answered ${status}: ${text}\n`);
  process.exitCode = EXIT.failure;
}

const simulatorOptions = (cmd: Command): Command =>
  cmd
    .option('--simulator <url>', 'the simulator started by simulate or demo', `http://${DEFAULT_SIMULATOR_LISTEN}`)
    .option('--control-token <token>', "the simulator's --control-token, if it has one");

/**
 * `webhook trigger TYPE` makes the simulator emit a signed event of any catalog type to its
 * registered endpoints; `webhook resend EVENT_ID` delivers a past event again (a replay: same id,
 * which the sidecar answers as a duplicate), in the spirit of `stripe trigger` / `stripe events resend`.
 */
export function registerSimulatorWebhookCommands(webhook: Command): void {
  simulatorOptions(
    webhook
      .command('trigger')
      .argument('<type>', `event type: ${EVENT_TYPES.join(', ')}`)
      .description('make the simulator (simulate or demo) send a signed event of this type to its endpoints')
      .option('--data <json>', 'the event data object, e.g. \'{"userReference":"alice"}\' (DSR types get defaults)'),
  ).action(async (type: string, flags: SimulatorFlags & { data?: string }) => {
    if (!(EVENT_TYPES as readonly string[]).includes(type)) {
      throw new CliUsageError(`unknown event type "${type}": one of ${EVENT_TYPES.join(', ')}`);
    }
    let data: unknown = {};
    if (flags.data !== undefined) {
      try {
        data = JSON.parse(flags.data);
      } catch {
        throw new CliUsageError('--data: not JSON');
      }
      if (typeof data !== 'object' || data === null || Array.isArray(data)) throw new CliUsageError('--data: must be a JSON object');
    }
    await control(flags, '/_simulator/events', { type, data });
  });
  simulatorOptions(
    webhook
      .command('resend')
      .argument('<event-id>', 'id of an event the simulator sent (evt_…; see /_simulator/deliveries)')
      .description('make the simulator deliver a past event again, unchanged (a replay the sidecar deduplicates)'),
  ).action(async (eventId: string, flags: SimulatorFlags) => {
    await control(flags, `/_simulator/events/${encodeURIComponent(eventId)}/resend`, {});
  });
}
