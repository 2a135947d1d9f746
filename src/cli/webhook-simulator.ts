import type { Command } from 'commander';
import { request } from 'undici';
import { setTimeout as sleep } from 'node:timers/promises';
import { EVENT_TYPES, type DeliveryTimeline } from '../simulator/index.js';
import { CliUsageError, EXIT } from './errors.js';
import { DEFAULT_SIMULATOR_LISTEN } from './simulate.js';

interface SimulatorFlags {
  simulator: string;
  controlToken?: string;
}

/** What one of the simulator's control requests answered; null when it was reported as a failure. */
async function control(flags: SimulatorFlags, method: 'GET' | 'POST', path: string, body?: unknown): Promise<{ base: URL; text: string } | null> {
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
      method,
      headers: {
        'content-type': 'application/json',
        ...(flags.controlToken !== undefined ? { 'x-simulator-control-token': flags.controlToken } : {}),
      },
      ...(method === 'POST' ? { body: JSON.stringify(body ?? {}) } : {}),
      signal: AbortSignal.timeout(10_000),
    });
    status = res.statusCode;
    text = await res.body.text();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).name;
    process.stderr.write(`consent-sidecar: could not reach the simulator at ${base.origin} (${code}); start it with simulate or demo\n`);
    process.exitCode = EXIT.usage;
    return null;
  }
  if (status >= 200 && status < 300) return { base, text };
  process.stderr.write(`consent-sidecar: the simulator answered ${status}: ${text}\n`);
  process.exitCode = EXIT.failure;
  return null;
}

/** How long the first attempt of each delivery may take to be answered (the simulator's own deadline is 10 s by default). */
const FIRST_ATTEMPT_PATIENCE_MS = 30_000;

/** What a 200 of the sidecar says it did with the event (`{"status": …}`). */
const ACCEPTED: Readonly<Record<string, string>> = {
  accepted: 'the app has it',
  queued: 'in the queue (Redis): a worker forwards it to the app',
  duplicate: 'accepted before: not forwarded again',
  unrouted: 'no route takes its type: not forwarded',
  ignored: 'the app does not want its type (--app-webhook-ignore): not forwarded',
};

/** The word the sidecar's answer body says (`{"status":"duplicate"}`, `{"error":"signature_mismatch"}`), if any. */
function saidIn(answer: string | undefined): string | undefined {
  try {
    const o = JSON.parse(answer ?? '') as { status?: unknown; error?: unknown };
    const word = typeof o.status === 'string' ? o.status : typeof o.error === 'string' ? o.error : undefined;
    return word !== undefined && /^[a-z0-9_]{1,64}$/.test(word) ? word : undefined;
  } catch {
    return undefined;
  }
}

/** What an endpoint's answer means, for the line that reports it: its status, what it said, and what that means. */
function meaning(status: number, answer: string | undefined): string {
  const said = saidIn(answer);
  const head = `${status}${said ? ` ${said}` : ''}`;
  if (status >= 200 && status < 300) return `${head}: ${(said && ACCEPTED[said]) ?? 'accepted'}`;
  if (status === 401) return `${head}: refused: signature, timestamp or required header${said ? '' : " (the sidecar's log says which)"}`;
  if (status === 400) return `${head}: refused: not a valid envelope`;
  if (status === 413) return `${head}: refused: body too large`;
  if (status === 404 || status === 405) return `${head}: refused: wrong path or method for the webhook ingress`;
  if (status === 503) return `${head}: not accepted now (the app refused, or Redis is away); the simulator retries`;
  return `${head}: not accepted; the simulator retries`;
}

/**
 * Prints the event the simulator sent (stdout, its JSON as the simulator answered), then waits for
 * the first attempt of each of its deliveries (the last `expected` ones of that event) and says on
 * stderr what each endpoint answered: its status, what the sidecar said (`accepted`, `queued`,
 * `duplicate`, the refusal's reason) and what that means. Exit 0 when every endpoint accepted it; 1 when one did not or
 * when no endpoint is registered (nobody received the event).
 */
async function sendAndReport(flags: SimulatorFlags, path: string, body: unknown): Promise<void> {
  const sent = await control(flags, 'POST', path, body);
  if (!sent) return;
  process.stdout.write(`${sent.text}\n`);
  const event = JSON.parse(sent.text) as { id: string; deliveries?: number };
  const deadline = Date.now() + FIRST_ATTEMPT_PATIENCE_MS;
  let mine: DeliveryTimeline[] = [];
  for (;;) {
    const listed = await control(flags, 'GET', '/_simulator/deliveries');
    if (!listed) return;
    const timelines = (JSON.parse(listed.text) as DeliveryTimeline[]).filter((t) => t.eventId === event.id);
    mine = timelines.slice(timelines.length - (event.deliveries ?? timelines.length));
    if (mine.every((t) => t.attempts.length > 0) || Date.now() > deadline) break;
    await sleep(50);
  }
  if (mine.length === 0) {
    process.stderr.write(
      'consent-sidecar: no webhook endpoint is registered at the simulator, so nobody received the event ' +
        '(register one: simulate --webhook-endpoint URL --webhook-secret whsec_…, or POST /_simulator/webhook-endpoints)\n',
    );
    process.exitCode = EXIT.failure;
    return;
  }
  const endpoints = await control(flags, 'GET', '/_simulator/webhook-endpoints');
  if (!endpoints) return;
  const urls = new Map((JSON.parse(endpoints.text) as { id: string; url: string }[]).map((e) => [e.id, e.url]));
  let allAccepted = true;
  for (const t of mine) {
    const first = t.attempts[0];
    const where = `${t.endpointId} ${urls.get(t.endpointId) ?? ''}`.trim();
    if (!first) {
      allAccepted = false;
      process.stderr.write(`${where}: no answer yet after ${FIRST_ATTEMPT_PATIENCE_MS / 1000} s (see ${sent.base.origin}/_simulator/deliveries)\n`);
    } else if (first.status === undefined) {
      allAccepted = false;
      process.stderr.write(`${where}: no answer (${first.error ?? 'error'}); the simulator retries\n`);
    } else {
      if (first.status < 200 || first.status >= 300) allAccepted = false;
      process.stderr.write(`${where} answered ${meaning(first.status, first.answer)}\n`);
    }
  }
  if (!allAccepted) process.exitCode = EXIT.failure;
}

const simulatorOptions = (cmd: Command): Command =>
  cmd
    .option('--simulator <url>', 'the simulator started by simulate or demo', `http://${DEFAULT_SIMULATOR_LISTEN}`)
    .option('--control-token <token>', "the simulator's --control-token, if it has one");

/**
 * `webhook trigger TYPE` makes the simulator emit a signed event of any catalog type to its
 * registered endpoints; `webhook resend EVENT_ID` delivers a past event again (a replay: same id,
 * which the sidecar answers as a duplicate), in the spirit of `stripe trigger` / `stripe events resend`.
 * Both print the event (stdout) and what each endpoint answered to its first attempt (stderr).
 */
export function registerSimulatorWebhookCommands(webhook: Command): void {
  simulatorOptions(
    webhook
      .command('trigger')
      .argument('<type>', `event type: ${EVENT_TYPES.join(', ')}`)
      .description('make the simulator (simulate or demo) send a signed event of this type to its endpoints; prints the event, then what each endpoint answered (exit 1 when one did not accept it, or when none is registered)')
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
    await sendAndReport(flags, '/_simulator/events', { type, data });
  });
  simulatorOptions(
    webhook
      .command('resend')
      .argument('<event-id>', 'id of an event the simulator sent (evt_…; see /_simulator/deliveries)')
      .description('make the simulator deliver a past event again, unchanged (a replay the sidecar deduplicates); prints what each endpoint answered'),
  ).action(async (eventId: string, flags: SimulatorFlags) => {
    await sendAndReport(flags, `/_simulator/events/${encodeURIComponent(eventId)}/resend`, {});
  });
}
