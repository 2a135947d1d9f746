import { writeSync } from '../lib/node-fs.js';

/**
 * Most bytes of log lines waiting for stdout (8 MiB). Beyond it lines are dropped, never waited
 * for: a reader that stopped reading must not stop the process (nor its SIGTERM handling).
 */
export const STDOUT_BUFFER_BYTES = 8 * 1024 * 1024;
/** How soon lines that stdout did not take are offered again (ms). */
const RETRY_MS = 20;

/** Where log lines go: one JSON line, newline included, per `write`. */
export interface DestinationStream {
  write(line: string): unknown;
}

/** stdout for log lines: written at once when it takes them, in order, never blocking. */
export interface StdoutSink extends DestinationStream {
  write(line: string): boolean;
  /** Bytes written and not yet taken by stdout. */
  readonly writableLength: number;
  /** Lines dropped because more than {@link STDOUT_BUFFER_BYTES} waited. */
  readonly dropped: number;
  on(event: 'error', listener: (err: Error) => void): unknown;
  /** Waits at most `timeoutMs` for what waits to be taken. */
  drain(timeoutMs: number): Promise<void>;
}

/**
 * The process's one stdout for log lines, shared by the JSON logs and the decision log so their
 * lines never interleave. Node writes to a pipe on stdout synchronously on Linux: a full pipe (a
 * log shipper that stopped reading) blocked the event loop, and SIGTERM with it. Here a line is
 * written at once while stdout takes it, so lines keep their order with everything else the
 * process does; when it does not (EAGAIN), lines wait in a bounded buffer offered again on a timer,
 * and beyond the bound they are dropped.
 */
class NonBlockingStdout implements StdoutSink {
  private readonly waiting: Buffer[] = [];
  private waitingBytes = 0;
  private timer: NodeJS.Timeout | null = null;
  private droppedLines = 0;
  private errorListener: ((err: Error) => void) | null = null;
  private readonly drained = new Set<() => void>();

  constructor(private readonly fd: number) {}

  get writableLength(): number {
    return this.waitingBytes;
  }

  get dropped(): number {
    return this.droppedLines;
  }

  on(_event: 'error', listener: (err: Error) => void): this {
    this.errorListener = listener;
    return this;
  }

  write(line: string): boolean {
    let rest = Buffer.from(line, 'utf8');
    if (this.waitingBytes === 0) {
      const n = this.tryWrite(rest);
      if (n === rest.length) return true;
      if (n < 0) return false;
      rest = rest.subarray(n);
    }
    if (this.waitingBytes + rest.length > STDOUT_BUFFER_BYTES) {
      this.droppedLines++;
      return false;
    }
    this.waiting.push(rest);
    this.waitingBytes += rest.length;
    this.schedule();
    return false;
  }

  drain(timeoutMs: number): Promise<void> {
    if (this.waitingBytes === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.drained.delete(done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      timer.unref();
      this.drained.add(done);
    });
  }

  /** Bytes written (possibly fewer than given), 0 when stdout takes none now, -1 when it failed. */
  private tryWrite(buf: Buffer): number {
    try {
      return writeSync(this.fd, buf);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EAGAIN' || code === 'EWOULDBLOCK') return 0;
      this.errorListener?.(err as Error);
      return -1;
    }
  }

  private schedule(): void {
    if (this.timer !== null) return;
    this.timer = setTimeout(() => this.flush(), RETRY_MS);
    this.timer.unref();
  }

  private flush(): void {
    this.timer = null;
    while (this.waiting.length > 0) {
      const head = this.waiting[0]!;
      const n = this.tryWrite(head);
      if (n < 0) {
        // Broken for good (EPIPE): what waits is dropped.
        this.droppedLines += this.waiting.length;
        this.waiting.length = 0;
        this.waitingBytes = 0;
        break;
      }
      this.waitingBytes -= n;
      if (n < head.length) {
        this.waiting[0] = head.subarray(n);
        return this.schedule();
      }
      this.waiting.shift();
    }
    for (const done of [...this.drained]) done();
  }
}

let shared: StdoutSink | undefined;

/** The process's stdout for log lines (one for the whole process). */
export function stdoutSink(): StdoutSink {
  if (shared) return shared;
  // Node opens a pipe on fd 1 with uv_pipe_open, which puts it in non-blocking mode (libuv's
  // documented behaviour): a full pipe then answers a write with EAGAIN instead of blocking.
  void process.stdout;
  return (shared = new NonBlockingStdout(1));
}
