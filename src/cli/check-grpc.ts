import { DEFAULT_FORWARD_AUTH_USER_HEADER } from '../config/index.js';
import { formatHostPort, parseListenAddress } from '../lib/listen-address.js';
import type { GrpcCheckAnswer } from '../grpc/check-client.js';
import { CliUsageError, EXIT } from './errors.js';

/** google.rpc.Code names, for the line on stderr. */
const CODE_NAMES: Readonly<Record<number, string>> = { 0: 'OK', 3: 'INVALID_ARGUMENT', 7: 'PERMISSION_DENIED', 14: 'UNAVAILABLE' };

/** `--grpc HOST:PORT` or `unix:/path` as a grpc-js target; anything else is a usage error naming the flag. */
export function grpcTarget(value: string): string {
  const parsed = parseListenAddress(value, { unix: true });
  if (typeof parsed === 'string') throw new CliUsageError(`--grpc: ${parsed}`);
  if (parsed.path !== undefined) return `unix:${parsed.path}`;
  if (parsed.port === 0) throw new CliUsageError(`--grpc: port 0 is no listener, got "${value}"`);
  return formatHostPort(parsed.host, parsed.port);
}

/** The only header value taken: given exactly once. */
const one = (headers: ReadonlyMap<string, readonly string[]>, name: string): string | undefined => {
  const values = headers.get(name);
  return values?.length === 1 ? values[0] : undefined;
};

/**
 * What a CheckResponse says, as the HTTP `check` prints it: the decision API's body and the exit
 * code. Fail closed as Envoy is: ALLOW only for status OK with an ok_response whose
 * `x-consent-valid-until` is an integer still in the future; a PERMISSION_DENIED with its denied
 * response is the service's DENY; anything else is no decision (exit 2), its cause from
 * `x-consent-decision-error`.
 */
export function grpcVerdict(a: GrpcCheckAnswer, configKey: string, nowMs: number): { body: Record<string, unknown>; exitCode: number; line: string } {
  const source = one(a.headers, 'x-consent-decision-source') ?? (typeof a.metadata.source === 'string' ? a.metadata.source : 'unknown');
  const id = one(a.headers, 'x-consent-decision-id');
  const line = `gRPC status ${a.code} ${CODE_NAMES[a.code] ?? ''}`.trimEnd() + `${a.httpStatus ? `, HTTP ${a.httpStatus}` : ''}, source ${source}${id ? `, decision id ${id}` : ''}`;
  const until = one(a.headers, 'x-consent-valid-until');
  if (a.code === 0 && a.response === 'ok' && until !== undefined && /^\d{1,16}$/.test(until) && Number(until) > nowMs) {
    return { body: { decision: 'ALLOW', configKey, validUntil: Number(until) }, exitCode: EXIT.ok, line };
  }
  if (a.code === 7 && a.response === 'denied') {
    const reason = one(a.headers, 'x-consent-deny-reason') ?? 'evaluated';
    return { body: reason === 'evaluated' ? { decision: 'DENY', configKey } : { decision: 'DENY', reason }, exitCode: EXIT.deny, line };
  }
  const error = one(a.headers, 'x-consent-decision-error') ?? (a.code === 0 ? 'allow_without_valid_until' : `grpc_status_${a.code}`);
  return { body: { decision: 'DENY', error }, exitCode: EXIT.usage, line };
}

/**
 * `check --grpc TARGET`: asks the sidecar's gRPC ext_authz listener as Envoy would, prints the
 * answer (stdout) and the gRPC status, source and decision id (stderr), and sets the exit code
 * (0 ALLOW, 1 DENY, 2 no decision, the listener not reached included).
 */
export async function checkViaGrpc(o: { grpc: string; userHeader?: string; userReference: string; configKey: string; timeoutMs: number }): Promise<void> {
  const target = grpcTarget(o.grpc);
  // grpc-js is loaded only for this form of check.
  const { checkOverGrpc } = await import('../grpc/check-client.js');
  const r = await checkOverGrpc({ target, userHeader: o.userHeader ?? DEFAULT_FORWARD_AUTH_USER_HEADER, userReference: o.userReference, configKey: o.configKey, timeoutMs: o.timeoutMs });
  if ('failed' in r) {
    // No answer from the listener is not an answer: print none, say why, exit 2.
    process.stderr.write(`consent-sidecar: could not get an answer from the gRPC listener at ${target} (${r.status}: ${r.details}); is it running with --grpc-listen? No decision.\n`);
    process.exitCode = EXIT.usage;
    return;
  }
  const v = grpcVerdict(r, o.configKey, Date.now());
  process.stdout.write(`${JSON.stringify(v.body)}\n`);
  process.stderr.write(`${v.line}\n`);
  process.exitCode = v.exitCode;
}
