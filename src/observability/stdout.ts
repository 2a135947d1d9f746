import type { DestinationStream } from 'pino';
import { createRequire } from 'node:module';
import type { SonicBoom } from 'sonic-boom';

// CommonJS whose module.exports is the class; its types name it `SonicBoom`.
const SonicBoomClass = createRequire(import.meta.url)('sonic-boom') as typeof SonicBoom;

/**
 * Most bytes of log lines waiting for stdout (8 MiB). Beyond it lines are dropped, never waited
 * for: a reader that stopped reading must not stop the process (nor its SIGTERM handling).
 */
export const STDOUT_BUFFER_BYTES = 8 * 1024 * 1024;

/** stdout for log lines: written without blocking, in order, by every writer of the process. */
export interface StdoutSink extends DestinationStream {
  write(line: string): boolean;
  /** Bytes written and not yet taken by stdout's reader. */
  readonly writableLength: number;
  on(event: 'error', listener: (err: Error) => void): unknown;
  /** Waits at most `timeoutMs` for what is buffered to go out. */
  drain(timeoutMs: number): Promise<void>;
}

let shared: StdoutSink | undefined;

/**
 * The process's one asynchronous stdout (sonic-boom, pino's own writer, on fd 1, `sync: false`),
 * shared by the JSON logs and the decision log so their lines never interleave. Node writes to a
 * pipe on stdout synchronously on Linux: a full pipe blocked the event loop, and SIGTERM with it.
 * Made directly, not with `pino.destination()`, which also registers a synchronous flush at exit
 * that spins for ever on a pipe nobody reads; what is buffered goes out with {@link StdoutSink.drain}.
 */
export function stdoutSink(): StdoutSink {
  if (shared) return shared;
  // Node opens a pipe on fd 1 with uv_pipe_open, which puts it in non-blocking mode (libuv's
  // documented behaviour): a full pipe then answers sonic-boom's writes with EAGAIN, retried on a
  // timer, instead of holding a thread-pool thread in write() for ever, which process.exit waits for.
  void process.stdout;
  const boom = new SonicBoomClass({ fd: 1, sync: false, minLength: 0, maxLength: STDOUT_BUFFER_BYTES });
  let pending = 0;
  boom.on('write', (n: number) => (pending = Math.max(0, pending - n)));
  boom.on('drop', (data: string) => (pending = Math.max(0, pending - Buffer.byteLength(data))));
  const sink: StdoutSink = {
    write(line) {
      pending += Buffer.byteLength(line);
      return boom.write(line);
    },
    get writableLength() {
      return pending;
    },
    on(event, listener) {
      return boom.on(event, listener);
    },
    drain(timeoutMs) {
      // sonic-boom's flush() with minLength 0 calls back at once, a write still in flight: wait
      // for the bytes written to be taken instead.
      if (pending === 0) return Promise.resolve();
      return new Promise((resolve) => {
        const done = (): void => {
          clearTimeout(timer);
          boom.off('write', check);
          resolve();
        };
        const check = (): void => {
          if (pending === 0) done();
        };
        const timer = setTimeout(done, timeoutMs);
        timer.unref();
        boom.on('write', check);
      });
    },
  };
  return (shared = sink);
}
