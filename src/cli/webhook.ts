import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { DEFAULT_WEBHOOK_TOLERANCE_S, parseRequiredHeader, parseWebhookSecrets, secretFlagWarning, type RequiredHeader } from '../config/index.js';
import { parseEnvelope, signatureHeaders, verifyDelivery, type DeliveryHeaders } from '../webhooks/index.js';
import { registerDeadLetters } from './dead-letters.js';
import { CliUsageError, EXIT } from './errors.js';
import { registerSimulatorWebhookCommands } from './webhook-simulator.js';

const repeat = (value: string, previous: string[] | undefined): string[] => [...(previous ?? []), value];

function readFileOrUsage(flag: string, path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new CliUsageError(`${flag}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
}

async function readStdin(): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** The raw body: a file, `-` or nothing for stdin (never a terminal). Bytes, never decoded. */
async function readBodyArg(path: string | undefined): Promise<Buffer> {
  if (path !== undefined && path !== '-') return readFileOrUsage('--body-file', path);
  if (process.stdin.isTTY) throw new CliUsageError('--body-file: give a file, or pipe the raw body on stdin');
  return readStdin();
}

/** `--secret` values and `--secret-file` lines, each checked as the sidecar's config checks them. */
function readSecrets(values: readonly string[] | undefined, file: string | undefined): readonly string[] {
  const secrets: string[] = [];
  if (values?.length) {
    const parsed = parseWebhookSecrets(values.join('\n'));
    if ('error' in parsed) throw new CliUsageError(`--secret: ${parsed.error}`);
    secrets.push(...parsed.value);
  }
  if (file !== undefined) {
    const parsed = parseWebhookSecrets(readFileOrUsage('--secret-file', file).toString('utf8'));
    if ('error' in parsed) throw new CliUsageError(`--secret-file: ${parsed.error}`);
    secrets.push(...parsed.value);
  }
  if (secrets.length === 0) throw new CliUsageError('--secret: give at least one whsec_ secret (or --secret-file)');
  return secrets;
}

function parseIntFlag(flag: string, text: string | undefined, fallback: number, min: number): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < min) throw new CliUsageError(`${flag}: expected an integer ≥ ${min}, got "${text}"`);
  return n;
}

/**
 * `Name: value` lines into lower-case headers. Accepts what `webhook sign` prints and a captured
 * request head: a leading request line is skipped, and the head ends at the first blank line.
 */
export function parseHeaderLines(flag: string, lines: readonly string[], into: Record<string, string>): void {
  for (const [i, line] of lines.entries()) {
    if (i === 0 && /^[A-Z]+ \S+ HTTP\/\d/.test(line)) continue;
    const colon = line.indexOf(':');
    if (colon <= 0) throw new CliUsageError(`${flag}: expected "Name: value", got "${line.slice(0, 40)}"`);
    into[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
}

function headerFileLines(path: string): string[] {
  const text = readFileOrUsage('--headers-file', path).toString('utf8');
  const head = text.split(/\r?\n\r?\n/, 1)[0] ?? '';
  return head.split(/\r?\n/).filter((l) => l.trim() !== '');
}

function registerSign(webhook: Command): void {
  webhook
    .command('sign')
    .description('sign a body the way the service does and print the headers to send')
    .option('--secret <whsec_…>', `the endpoint secret (whsec_ included)${secretFlagWarning('secret')}`)
    .option('--secret-file <path>', 'file whose first secret line is used')
    .option('--timestamp <s>', 'epoch seconds to sign with (default: now)')
    .option('--body-file <path>', 'raw body to sign; stdin when absent or "-"')
    .option('--curl <url>', 'also print a curl command that sends the delivery to this URL')
    .action(async (opts: { secret?: string; secretFile?: string; timestamp?: string; bodyFile?: string; curl?: string }) => {
      const [secret] = readSecrets(opts.secret === undefined ? undefined : [opts.secret], opts.secretFile);
      const timestampS = parseIntFlag('--timestamp', opts.timestamp, Math.floor(Date.now() / 1000), 0);
      const body = await readBodyArg(opts.bodyFile);
      const parsed = parseEnvelope(body);
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        ...(parsed.ok ? { 'x-service-event-id': parsed.envelope.id } : {}),
        'x-service-delivery-id': `dlv_${randomBytes(8).toString('hex')}`,
        ...signatureHeaders(secret as string, timestampS, body),
      };
      const lines = Object.entries(headers).map(([k, v]) => `${k}: ${v}`);
      process.stdout.write(`${lines.join('\n')}\n`);
      if (opts.curl !== undefined) {
        const data = opts.bodyFile && opts.bodyFile !== '-' ? `@${opts.bodyFile}` : '@-';
        const quoted = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;
        const flags = lines.map((l) => `-H ${quoted(l)}`).join(' ');
        process.stdout.write(`curl -sS -X POST ${flags} --data-binary ${quoted(data)} ${quoted(opts.curl)}\n`);
      }
      if (!parsed.ok) process.stderr.write(`note: the body is not a valid envelope (${parsed.detail}); signed anyway\n`);
    });
}

interface VerifyOpts {
  secret?: string[];
  secretFile?: string;
  header?: string[];
  headersFile?: string;
  bodyFile?: string;
  toleranceS?: string;
  now?: string;
  requiredHeader?: string;
}

function registerVerify(webhook: Command): void {
  webhook
    .command('verify')
    .description('verify a captured delivery (headers + raw body); prints ok, or the reason code it fails')
    .option('--secret <whsec_…>', `an accepted secret; repeat for rotation${secretFlagWarning('secret')}`, repeat)
    .option('--secret-file <path>', 'file with one whsec_ secret per line')
    .option('--header <"Name: value">', 'a delivery header; repeat', repeat)
    .option('--headers-file <path>', 'captured headers, one "Name: value" per line (a request line is skipped)')
    .option('--body-file <path>', 'the exact raw body; stdin when absent or "-"')
    .option('--tolerance-s <s>', 'timestamp tolerance, both directions', String(DEFAULT_WEBHOOK_TOLERANCE_S))
    .option('--now <s>', 'epoch seconds to verify at (default: now), e.g. to check an old capture')
    .option('--required-header <"Name: value">', 'the custom header every delivery must carry')
    .action(async (opts: VerifyOpts) => {
      const secrets = readSecrets(opts.secret, opts.secretFile);
      const headers: Record<string, string> = {};
      if (opts.headersFile !== undefined) parseHeaderLines('--headers-file', headerFileLines(opts.headersFile), headers);
      parseHeaderLines('--header', opts.header ?? [], headers);
      if (Object.keys(headers).length === 0) throw new CliUsageError('--header: give the delivery headers (--header or --headers-file)');
      const toleranceS = parseIntFlag('--tolerance-s', opts.toleranceS, DEFAULT_WEBHOOK_TOLERANCE_S, 0);
      const nowMs = opts.now === undefined ? Date.now() : parseIntFlag('--now', opts.now, 0, 0) * 1000;
      let requiredHeader: RequiredHeader | null = null;
      if (opts.requiredHeader !== undefined) {
        const parsed = parseRequiredHeader(opts.requiredHeader);
        if ('error' in parsed) throw new CliUsageError(`--required-header: ${parsed.error}`);
        requiredHeader = parsed.value;
      }
      const body = await readBodyArg(opts.bodyFile);

      const result = verifyDelivery(headers as DeliveryHeaders, body, { secrets, toleranceS, nowMs, requiredHeader });
      if (!result.ok) {
        process.stdout.write(`${result.code}\n`);
        if (result.skewS !== undefined) process.stderr.write(`timestamp skew ${result.skewS.toFixed(0)} s (tolerance ${toleranceS} s)\n`);
        process.exitCode = EXIT.failure;
        return;
      }
      const envelope = parseEnvelope(body);
      if (!envelope.ok) {
        process.stdout.write(`${envelope.code}\n`);
        process.stderr.write(`signature ok (secret #${result.secretIndex}), but ${envelope.detail}\n`);
        process.exitCode = EXIT.failure;
        return;
      }
      process.stdout.write('ok\n');
      process.stderr.write(
        `secret #${result.secretIndex} matched; skew ${result.skewS.toFixed(0)} s; event ${envelope.envelope.id} (${envelope.envelope.type}, sequence ${envelope.envelope.sequence})\n`,
      );
      process.exitCode = EXIT.ok;
    });
}

/**
 * `webhook sign` and `webhook verify`, built on the very verification the listener uses.
 *
 * @example
 * consent-sidecar webhook sign --secret whsec_… --body-file event.json > headers.txt
 * consent-sidecar webhook verify --secret whsec_… --headers-file headers.txt --body-file event.json
 */
export function registerWebhook(program: Command): void {
  const webhook = program
    .command('webhook')
    .description('sign a body like the service, verify a captured delivery, make the simulator send one, or list and replay dead letters (queue mode)');
  registerSign(webhook);
  registerVerify(webhook);
  registerSimulatorWebhookCommands(webhook);
  registerDeadLetters(webhook);
}
