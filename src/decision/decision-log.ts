import { createHmac, randomBytes } from 'node:crypto';
import { constants, createWriteStream, openSync } from '../lib/node-fs.js';
import { stdoutSink } from '../observability/stdout.js';
import type { Logger } from '../observability/logger.js';
import type { DecisionLogConfig } from '../config/index.js';
import type { DecisionRoute } from './metrics.js';
import type { Answer, CheckRequest } from './types.js';

/**
 * Mode a new decision log file is created with (what umask 022 gives by default), explicit so that
 * the umask set around the Unix socket's bind (src/http/listen.ts) can never widen it, even if the
 * file's asynchronous open coincides with that bind.
 */
const DECISION_LOG_FILE_MODE = 0o644;

/**
 * An append-only file stream that never follows a symbolic link at `path` (one planted there would
 * send decisions to whatever file it points at).
 */
function openLogFile(path: string): DecisionLogSink {
  const fd = openSync(path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW, DECISION_LOG_FILE_MODE);
  return createWriteStream('', { fd });
}

/** Where lines go: stdout or an append-only file stream (anything with write and a buffered length). */
export interface DecisionLogSink {
  write(chunk: string): boolean;
  readonly writableLength: number;
  on?(event: 'error', listener: (err: Error) => void): unknown;
  end?(cb?: () => void): unknown;
}

export interface DecisionLogDeps {
  readonly logger: Logger;
  /** Counts each line not written (buffer full or sink broken). */
  readonly dropped: { inc(n?: number): void };
  /** Default: stdout or the file the config names. */
  readonly sink?: DecisionLogSink;
  /** [0, 1); default Math.random. */
  readonly random?: () => number;
  /** Epoch ms. */
  readonly now?: () => number;
}

/** One line of the decision log. `userRefHash` is an HMAC: the reference itself is never written. */
export interface DecisionLogLine {
  readonly time: string;
  readonly event: 'decision';
  readonly configKey: string;
  readonly decision: 'allow' | 'deny';
  readonly source: Answer['source'];
  readonly status: number;
  /** Why it is not an ALLOW: `evaluated`, the pre-evaluation reason, or the fail-closed cause. */
  readonly cause?: string;
  /** The route that answered (`forward_auth`, `batch`, `ext_authz_grpc`); absent for the check. */
  readonly route?: Exclude<DecisionRoute, 'check'>;
  readonly userRefHash: string;
  /** The answer's id, as sent in `x-consent-decision-id` (or the batch item's `decisionId`). */
  readonly decisionId?: string;
}

/**
 * The optional decision log (off by default): one JSON line per sampled decision with configKey,
 * decision, source, cause and a keyed hash of the user reference (HMAC-SHA-256, so equal references
 * can be correlated by whoever holds the key and by nobody else). Never blocks an answer: when more
 * than `bufferBytes` wait to be written, lines are dropped and counted.
 */
export class DecisionLog {
  private readonly sink: DecisionLogSink;
  private readonly random: () => number;
  private readonly now: () => number;
  private readonly fallbackKey: string | null;
  private broken = false;

  constructor(
    private readonly config: DecisionLogConfig,
    private readonly deps: DecisionLogDeps,
  ) {
    this.random = deps.random ?? Math.random;
    this.now = deps.now ?? Date.now;
    this.fallbackKey = config.hashKey ? null : randomBytes(32).toString('base64url');
    if (!config.hashKey) {
      deps.logger.warn({ event: 'decision_log_random_key' }, 'decision log: no --decision-log-hash-key, so hashes are per process and cannot be correlated across restarts or replicas');
    }
    this.sink = deps.sink ?? (config.destination === 'stdout' ? stdoutSink() : openLogFile(config.destination));
    this.sink.on?.('error', (err: Error) => {
      if (!this.broken) deps.logger.error({ event: 'decision_log_failed', code: (err as NodeJS.ErrnoException).code }, 'decision log cannot be written; lines are dropped');
      this.broken = true;
    });
  }

  /** Writes (or samples out, or drops) the line of one decision. */
  record(req: CheckRequest, answer: Answer, route: DecisionRoute = 'check', decisionId?: string): void {
    if (this.config.sampleRate < 1 && this.random() >= this.config.sampleRate) return;
    const line = `${JSON.stringify(this.lineOf(req, answer, route, decisionId))}\n`;
    if (this.broken || this.sink.writableLength + line.length > this.config.bufferBytes) {
      this.deps.dropped.inc();
      return;
    }
    this.sink.write(line);
  }

  lineOf(req: CheckRequest, answer: Answer, route: DecisionRoute = 'check', decisionId?: string): DecisionLogLine {
    const key = this.config.hashKey?.current() ?? this.fallbackKey!;
    const userRefHash = createHmac('sha256', key).update(req.userReference, 'utf8').digest('hex').slice(0, 32);
    let cause: string | undefined;
    if (answer.decision !== 'allow') {
      const body = JSON.parse(answer.body) as { error?: unknown; reason?: unknown };
      cause = typeof body.error === 'string' ? body.error : typeof body.reason === 'string' ? body.reason : 'evaluated';
    }
    return {
      time: new Date(this.now()).toISOString(),
      event: 'decision',
      configKey: req.configKey,
      decision: answer.decision,
      source: answer.source,
      status: answer.status,
      ...(cause !== undefined ? { cause } : {}),
      ...(route === 'check' ? {} : { route }),
      userRefHash,
      ...(decisionId === undefined ? {} : { decisionId }),
    };
  }

  /** Flushes and closes a file sink (stdout stays open). */
  close(): Promise<void> {
    const sink = this.sink;
    if (!sink.end) return Promise.resolve();
    return new Promise((resolve) => sink.end!(() => resolve()));
  }
}
