import type { Command } from 'commander';
import { Pool } from 'undici';
import { DEFAULT_FORWARD_AUTH_USER_HEADER, resolveUpstreamConfig, UPSTREAM_OPTIONS } from '../config/index.js';
import {
  causeOf,
  decisionAnswer,
  failClosedAnswer,
  parseCheckResponse,
  UpstreamClient,
  type AllowedDecision,
  type UpstreamResponse,
} from '../decision/index.js';
import { parseListenAddress } from '../lib/listen-address.js';
import { checkViaGrpc } from './check-grpc.js';
import { CliUsageError, EXIT } from './errors.js';
import { addSpecOptions, camel, ONE_SHOT_UPSTREAM_MEANING, rawFlags, warnUnknownVariables } from './spec-options.js';

/**
 * Where `--via` points: a sidecar's decision URL (`http://127.0.0.1:7700`, a base path allowed) or its
 * Unix socket (`unix:/var/run/consent-sidecar/decision.sock`, the form the chart gives the app with
 * decisionSocket.enabled).
 */
interface ViaTarget {
  /** Origin undici connects to (any, with a socket path: the Host header only). */
  readonly origin: string;
  readonly socketPath?: string;
  readonly checkPath: string;
  /** For messages: what the user gave, without a path. */
  readonly shown: string;
}

function viaTarget(via: string): ViaTarget {
  if (via.trim().startsWith('unix:')) {
    const parsed = parseListenAddress(via, { unix: true });
    if (typeof parsed === 'string' || parsed.path === undefined) throw new CliUsageError(`--via: ${typeof parsed === 'string' ? parsed : `not a Unix socket: "${via}"`}`);
    return { origin: 'http://localhost', socketPath: parsed.path, checkPath: '/v1/authorization/check', shown: `unix:${parsed.path}` };
  }
  let base: URL;
  try {
    base = new URL(via);
  } catch {
    throw new CliUsageError(`--via: not a valid URL: "${via}" (http://host:port, or unix:/path/to.sock)`);
  }
  if (base.protocol !== 'http:' && base.protocol !== 'https:') throw new CliUsageError(`--via: expected http://host:port or unix:/path/to.sock, got "${via}"`);
  return { origin: base.origin, checkPath: base.pathname.replace(/\/+$/, '') + '/v1/authorization/check', shown: base.origin };
}

/** Asks a running sidecar; its answer is trusted only as far as its status and JSON say. */
async function viaSidecar(target: ViaTarget, body: string, timeoutMs: number): Promise<{ status: number; text: string; source: string }> {
  const pool = new Pool(target.origin, target.socketPath === undefined ? {} : { socketPath: target.socketPath });
  try {
    const res = await pool.request({
      method: 'POST',
      path: target.checkPath,
      headers: { 'content-type': 'application/json' },
      body,
      signal: AbortSignal.timeout(timeoutMs),
    });
    const source = res.headers['x-consent-decision-source'];
    return { status: res.statusCode, text: await res.body.text(), source: typeof source === 'string' ? source : 'unknown' };
  } finally {
    await pool.close();
  }
}

/** What `check` prints: the answer's status, body and source. Whether it is an ALLOW is not its to say. */
interface Shown {
  readonly status: number;
  readonly body: string;
  readonly source: string;
}

/** The ALLOW a sidecar's answer holds, as the fail-closed parser reads it; undefined for anything else. */
function allowedIn(res: UpstreamResponse, configKey: string): AllowedDecision | undefined {
  try {
    const { decision } = parseCheckResponse(res, configKey, Date.now());
    return decision.kind === 'allow' ? decision : undefined;
  } catch {
    // Not an ALLOW the parser takes: no ALLOW (the status and body are printed as they came).
    return undefined;
  }
}

/** Flags that choose and authenticate the service: meaningless with `--via` (the sidecar has its own). */
const UPSTREAM_ONLY_FLAGS = ['upstream-url', 'api-key', 'api-key-file'] as const;

/** Why a check could not be had, for stderr: the cause and, when there is one, the detail (`service answered 401`). */
function explain(err: unknown): string {
  const cause = causeOf(err);
  const detail = err instanceof Error && err.message ? `: ${err.message}` : '';
  const hint = /answered 40[13]\b/.test(detail) ? ' (check --api-key / --api-key-file)' : '';
  return `${cause}${detail}${hint}`;
}

export function registerCheck(program: Command): void {
  const cmd = program
    .command('check')
    .description('ask for one decision; exit 0 on ALLOW, 1 on DENY, 2 when no decision could be had')
    .requiredOption('--user-reference <ref>', 'the customer reference')
    .requiredOption('--config-key <key>', 'the Flow key')
    .option('--via <url>', 'ask a running sidecar at this URL instead of the service (http://127.0.0.1:7700, or unix:/path/to/decision.sock)')
    .option('--grpc <target>', "ask a running sidecar's gRPC ext_authz listener as Envoy would (HOST:PORT, e.g. 127.0.0.1:7703, or unix:/path), instead of the service")
    .option('--forward-auth-user-header <name>', "with --grpc: the request header that carries the user reference (the sidecar's --forward-auth-user-header)", DEFAULT_FORWARD_AUTH_USER_HEADER)
    .action(async (opts: { userReference: string; configKey: string; via?: string; grpc?: string; forwardAuthUserHeader?: string }) => {
      warnUnknownVariables();
      if (opts.via !== undefined || opts.grpc !== undefined) {
        const given = UPSTREAM_ONLY_FLAGS.filter((f) => cmd.getOptionValueSource(camel(f)) === 'cli');
        const form = opts.via !== undefined ? '--via' : '--grpc';
        if (opts.via !== undefined && opts.grpc !== undefined) throw new CliUsageError('--via and --grpc: ask the sidecar one way, over HTTP (--via) or over gRPC (--grpc)');
        if (given.length > 0) {
          throw new CliUsageError(
            `${form} asks a running sidecar, which uses its own upstream settings: drop ${given.map((f) => `--${f}`).join(', ')} (or drop ${form} to ask the service directly)`,
          );
        }
      }
      if (opts.grpc !== undefined) {
        const timeoutMs = Number(rawFlags(cmd, UPSTREAM_OPTIONS)['upstream-timeout-ms'] ?? 2000) || 2000;
        await checkViaGrpc({ grpc: opts.grpc, userHeader: opts.forwardAuthUserHeader, userReference: opts.userReference, configKey: opts.configKey, timeoutMs });
        return;
      }
      if (cmd.getOptionValueSource('forwardAuthUserHeader') === 'cli') throw new CliUsageError('--forward-auth-user-header is for --grpc (the header Envoy would send)');
      const body = JSON.stringify({ userReference: opts.userReference, configKey: opts.configKey });
      // What is printed, and the ALLOW that makes the exit code 0: only the fail-closed parser's.
      let shown: Shown;
      let allowed: AllowedDecision | undefined;
      let why = '';
      if (opts.via) {
        const target = viaTarget(opts.via);
        const timeoutMs = Number(rawFlags(cmd, UPSTREAM_OPTIONS)['upstream-timeout-ms'] ?? 2000) || 2000;
        let res: Awaited<ReturnType<typeof viaSidecar>>;
        try {
          res = await viaSidecar(target, body, timeoutMs);
        } catch (err) {
          // No answer from the sidecar is not an answer of the sidecar: print none, say why, exit 2.
          const code = (err as NodeJS.ErrnoException).code ?? (err as Error).name;
          process.stderr.write(`consent-sidecar: could not reach the sidecar at ${target.shown} (${code}); is it running? No decision.\n`);
          process.exitCode = EXIT.usage;
          return;
        }
        // Fail closed here too: only a 200 whose JSON the parser takes for an ALLOW counts as ALLOW.
        shown = { status: res.status, body: res.text, source: res.source };
        allowed = allowedIn({ status: res.status, date: undefined, body: res.text }, opts.configKey);
      } else {
        const upstream = resolveUpstreamConfig(rawFlags(cmd, UPSTREAM_OPTIONS));
        const client = new UpstreamClient(upstream, { connections: 1 });
        try {
          const decision = parseCheckResponse(await client.check(body), opts.configKey, Date.now()).decision;
          shown = decisionAnswer(decision, 'upstream');
          if (decision.kind === 'allow') allowed = decision;
        } catch (err) {
          shown = failClosedAnswer(causeOf(err));
          why = explain(err);
        } finally {
          await client.close();
        }
      }
      process.stdout.write(`${shown.body}\n`);
      process.stderr.write(`status ${shown.status}, source ${shown.source}${why ? `, ${why}` : ''}\n`);
      process.exitCode = shown.status === 200 ? (allowed !== undefined ? EXIT.ok : EXIT.deny) : EXIT.usage;
    });
  addSpecOptions(cmd, UPSTREAM_OPTIONS, {
    ...ONE_SHOT_UPSTREAM_MEANING,
    'upstream-url': "the consent service's base URL (required unless --via)",
    'upstream-timeout-ms': 'deadline of this check, retries included (with --via or --grpc: of the answer from the sidecar)',
  });
}
