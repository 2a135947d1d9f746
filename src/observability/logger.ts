import { LOG_LEVELS, type LogLevel } from './log-levels.js';
import { stdoutSink, type DestinationStream } from './stdout.js';

export type { DestinationStream };

type Fields = Record<string, unknown>;

/** `logger.info({ event: 'x', ... }, 'message')`, or a message alone. */
export interface LogFn {
  (fields: object, msg?: string): void;
  (msg: string): void;
}

/**
 * The sidecar's logger: JSON lines in pino's shape (`level` by name, ISO `time`, `service`, the
 * child bindings, the fields, `msg`), written by the sidecar's own code. pino, which this replaced,
 * loaded some 1 MB of modules (its worker-thread transports, serializers, redaction compiler) that
 * a pod paid for in memory and start time while the lines went through the sidecar's own stdout
 * writer anyway (docs/performance.md, Footprint).
 */
export interface Logger extends LevelMethods {
  readonly level: LogLevel;
  /** A logger whose lines all carry `bindings` (after the logger's own). */
  child(bindings: object): Logger;
  isLevelEnabled(level: LogLevel): boolean;
}

type WrittenLevel = Exclude<LogLevel, 'silent'>;
/** One method per level that writes lines: `fatal`, `error`, `warn`, `info`, `debug`, `trace`. */
type LevelMethods = { readonly [L in WrittenLevel]: LogFn };

const SEVERITY: Record<LogLevel, number> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60, silent: Number.POSITIVE_INFINITY };
const WRITTEN = LOG_LEVELS.filter((l): l is WrittenLevel => l !== 'silent');

/** What a credential's value becomes in a line. */
export const REDACTED = '[redacted]';
/** Fields censored wherever they appear at the top of a line. */
const SECRET_FIELDS = new Set(['apiKey', 'secret', 'secrets', 'signature', 'authorization', 'userReference']);
/** Censored one level down too, in any object field (`headers.authorization`, `req.authorization`). */
const SECRET_NESTED = new Set(['authorization', 'x-service-signature']);

const noop: LogFn = () => undefined;

/**
 * JSON logs, one event per line on stdout (the process's non-blocking stdout unless a destination
 * is given). Anything that looks like a credential is redacted even if a caller slips it into a log
 * object by mistake; an `Error` anywhere at the top of a line is written as its type, message,
 * stack, code and cause.
 */
export function createLogger(level: LogLevel, destination?: DestinationStream, options: { service?: string } = {}): Logger {
  return new JsonLogger(level, destination ?? stdoutSink(), { service: options.service ?? 'consent-sidecar' });
}

/** The `service` field of the simulator's log lines: it stands for the consent service, not the sidecar. */
export const SIMULATOR_SERVICE_NAME = 'consent-service-simulator';

/** A logger that drops everything, for tests and library use. */
export function silentLogger(): Logger {
  return createLogger('silent', { write: () => undefined });
}

// The level methods are set per instance in the constructor (declaration merging gives them their types).
interface JsonLogger extends LevelMethods {}

class JsonLogger implements Logger {
  constructor(
    readonly level: LogLevel,
    private readonly destination: DestinationStream,
    private readonly bindings: Fields,
  ) {
    const fns = {} as Record<WrittenLevel, LogFn>;
    // A level below the logger's costs a call to a no-op, nothing else.
    for (const name of WRITTEN) fns[name] = this.isLevelEnabled(name) ? this.writer(name) : noop;
    Object.assign(this, fns);
  }

  child(bindings: object): Logger {
    return new JsonLogger(this.level, this.destination, { ...this.bindings, ...redacted(bindings as Fields) });
  }

  isLevelEnabled(level: LogLevel): boolean {
    return SEVERITY[level] >= SEVERITY[this.level];
  }

  private writer(name: WrittenLevel): LogFn {
    return ((fieldsOrMsg: object | string, msg?: string): void => {
      // Whatever a caller passes, a line is written and nothing is thrown back into its request.
      const fields = fieldsOrMsg === null || typeof fieldsOrMsg !== 'object' ? {} : fieldsOrMsg instanceof Error ? { err: fieldsOrMsg } : (fieldsOrMsg as Fields);
      const message = typeof fieldsOrMsg === 'string' ? fieldsOrMsg : typeof msg === 'string' ? msg : fieldsOrMsg instanceof Error ? fieldsOrMsg.message : undefined;
      const line: Fields = { level: name, time: new Date().toISOString(), ...this.bindings, ...redacted(fields) };
      if (message !== undefined) line.msg = message;
      this.destination.write(`${stringify(line)}\n`);
    }) as LogFn;
  }
}

/** A copy of `fields` with credentials censored and errors made plain; the caller's object is left as it was. */
function redacted(fields: Fields): Fields {
  const out: Fields = {};
  for (const key of Object.keys(fields)) {
    const value = fields[key];
    if (value !== undefined && SECRET_FIELDS.has(key)) out[key] = REDACTED;
    else if (value instanceof Error) out[key] = plainError(value, 0);
    else if (value !== null && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).some((k) => SECRET_NESTED.has(k.toLowerCase()))) {
      const copy: Fields = { ...(value as Fields) };
      for (const k of Object.keys(copy)) if (SECRET_NESTED.has(k.toLowerCase()) && copy[k] !== undefined) copy[k] = REDACTED;
      out[key] = copy;
    } else out[key] = value;
  }
  return out;
}

/**
 * An error as pino's serializer wrote it: type, message, stack, its own fields (code, ...), its
 * cause, and an AggregateError's errors (`aggregateErrors`: a failed dual-stack connect names each
 * address there).
 */
function plainError(err: Error, depth: number): Fields {
  const nested = (value: unknown): unknown => (value instanceof Error ? (depth < 3 ? plainError(value, depth + 1) : safeString(value)) : value);
  const out: Fields = { type: err.constructor?.name ?? 'Error', message: err.message, stack: err.stack };
  for (const key of Object.keys(err)) {
    if (key === 'cause' || key === 'errors' || SECRET_FIELDS.has(key)) continue;
    out[key] = nested((err as unknown as Fields)[key]);
  }
  if (err.cause !== undefined) out.cause = err.cause instanceof Error ? nested(err.cause) : safeString(err.cause);
  const errors = (err as { errors?: unknown }).errors;
  if (Array.isArray(errors)) out.aggregateErrors = errors.map(nested);
  return out;
}

/** `String(value)`, or a placeholder for a value that cannot be made a string (no prototype, a throwing toString). */
function safeString(value: unknown): string {
  try {
    return String(value);
  } catch {
    return '[unprintable]';
  }
}

/** JSON of a line; a value JSON cannot take (a cycle, a BigInt) becomes a string instead of an exception. */
function stringify(line: Fields): string {
  try {
    return JSON.stringify(line, bigints);
  } catch {
    const seen = new WeakSet<object>();
    return JSON.stringify(line, (key, value: unknown) => {
      if (typeof value === 'bigint') return value.toString();
      if (value !== null && typeof value === 'object') {
        if (seen.has(value)) return '[Circular]';
        seen.add(value);
      }
      return value;
    });
  }
}

const bigints = (_key: string, value: unknown): unknown => (typeof value === 'bigint' ? value.toString() : value);
