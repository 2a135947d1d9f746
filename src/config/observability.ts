import { lstatSync } from '../lib/node-fs.js';
import { LOG_LEVELS, type LogLevel } from '../observability/log-levels.js';
import type { OptionSpec } from './option-spec.js';
import type { Reader } from './reader.js';
import type { Secret, SecretParser } from './secret.js';

// What the sidecar says about itself: the log level, and the optional decision log (one JSON line
// per decision, never the user reference).

// The levels belong to the logger (observability); the flag's reader takes them from there.
export { LOG_LEVELS, type LogLevel };

/** Decision log: share of decisions written (1 = all). */
export const DEFAULT_DECISION_LOG_SAMPLE_RATE = 1;
/** Decision log: bytes waiting to be written before lines are dropped (and counted). */
export const DEFAULT_DECISION_LOG_BUFFER_BYTES = 1_048_576;

export const LOG_LEVEL_OPTIONS: readonly OptionSpec[] = [
  { name: 'log-level', arg: '<level>', description: `one of ${LOG_LEVELS.join(', ')}`, defaultText: 'info' },
];

/** The optional decision log (off by default): one JSON line per decision, never the user reference. */
export const DECISION_LOG_OPTIONS: readonly OptionSpec[] = [
  { name: 'decision-log', arg: '<off|stdout|path>', description: 'write one JSON line per decision to stdout or to a file (appended)', defaultText: 'off' },
  {
    name: 'decision-log-sample-rate',
    arg: '<0..1>',
    description: 'share of decisions written',
    defaultText: String(DEFAULT_DECISION_LOG_SAMPLE_RATE),
  },
  {
    name: 'decision-log-hash-key',
    arg: '<key>',
    description: 'HMAC key for the user reference hash (16+ characters); random per process when absent',
    secret: true,
  },
  { name: 'decision-log-hash-key-file', arg: '<path>', description: 'file holding the HMAC key; re-read when it changes' },
  {
    name: 'decision-log-buffer-bytes',
    arg: '<bytes>',
    description: 'bytes waiting to be written before lines are dropped (counted)',
    defaultText: String(DEFAULT_DECISION_LOG_BUFFER_BYTES),
  },
];

/** `--log-level`. */
export function readLogLevel(r: Reader): LogLevel {
  return r.oneOf<LogLevel>('log-level', LOG_LEVELS, 'info');
}

const parseHashKey: SecretParser<string> = (text) => {
  const key = text.trim();
  return key.length >= 16 ? { value: key } : { error: 'the decision log hash key must be at least 16 characters' };
};

function isSymbolicLink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}

/** The optional decision log (`--decision-log*`). */
export interface DecisionLogConfig {
  /** `stdout`, or a file path the lines are appended to. */
  readonly destination: string;
  /** Share of decisions written, 0..1. */
  readonly sampleRate: number;
  /** HMAC key of the user reference hash; null: a random key per process. */
  readonly hashKey: Secret<string> | null;
  /** Bytes waiting to be written before lines are dropped. */
  readonly bufferBytes: number;
}

/** `--decision-log*`: null when off. */
export function readDecisionLog(r: Reader): DecisionLogConfig | null {
  const raw = r.raw('decision-log');
  const destination = raw?.value.trim() ?? 'off';
  const rateRaw = r.raw('decision-log-sample-rate');
  let sampleRate = DEFAULT_DECISION_LOG_SAMPLE_RATE;
  if (rateRaw) {
    const n = /^\s*(0|1|0?\.\d+|1\.0*)\s*$/.test(rateRaw.value) ? Number(rateRaw.value) : Number.NaN;
    if (Number.isNaN(n)) r.problem(rateRaw.label, `must be a number from 0 to 1, got "${rateRaw.value}"`);
    else sampleRate = n;
  }
  const bufferBytes = r.int('decision-log-buffer-bytes', DEFAULT_DECISION_LOG_BUFFER_BYTES, 1024, 1024 * 1024 * 1024);
  const hashKey = r.secret('decision-log-hash-key', parseHashKey);
  if (destination === 'off' || destination === '') {
    hashKey?.close();
    return null;
  }
  // A symbolic link planted at the path would send decisions wherever it points: never followed.
  if (destination !== 'stdout' && isSymbolicLink(destination)) r.problem(raw!.label, 'a symbolic link is there; it is not followed (give the file itself)');
  return Object.freeze({ destination, sampleRate, hashKey, bufferBytes });
}
