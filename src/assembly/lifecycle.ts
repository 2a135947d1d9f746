import { performance } from 'node:perf_hooks';

/**
 * How one part stops. `deadline` is when the whole shutdown must be done (performance.now() ms);
 * a part that can wait for work in flight waits until then at most. It may throw or reject.
 */
export type Stop = (deadline: number) => unknown;

/** The parts started together: they stop together, none waiting for another to finish first. */
export interface Step {
  /** Adds a part that has just started; it stops with the others of this step. */
  add(part: string, stop: Stop): void;
}

/**
 * The order a process's parts stop in, kept as they start: in steps, the latest step first, each
 * step after the one before it has stopped, the parts of one step together (one may wait on
 * another, as a hand-over in flight ends when the client it goes through closes). A part that
 * fails to stop is reported with its name, and every other part still stops. {@link close} stops
 * each part once, however often it is called; a part added after it is stopped at once.
 *
 * @example
 * const life = new Lifecycle((part, err) => logger.warn({ event: 'close_failed', part, err }));
 * await life.start(async () => {
 *   const db = await openDb();
 *   life.add('db', () => db.close());          // stops last
 *   const server = await listen();
 *   life.add('server', (deadline) => server.drain(deadline)); // stops first
 * });
 * // … await life.close(performance.now() + 5000);
 */
export class Lifecycle {
  private readonly steps: Map<string, Stop>[] = [];
  private closing: Promise<void> | undefined;

  /** `report` is told of each part that failed to stop; it must not throw. */
  constructor(private readonly report: (part: string, err: unknown) => void) {}

  /** A new step, stopped before every step made before it. */
  step(): Step {
    const parts = new Map<string, Stop>();
    this.steps.push(parts);
    return {
      add: (part, stop) => {
        if (parts.has(part)) throw new RangeError(`Lifecycle: a part named ${part} is in this step already`);
        // Too late to wait for its turn: stopped now, so that nothing started is left running.
        if (this.closing) void this.stopAll(new Map([[part, stop]]), performance.now());
        else parts.set(part, stop);
      },
    };
  }

  /** A part that has just started, in a step of its own: it stops before every part added before it. */
  add(part: string, stop: Stop): void {
    this.step().add(part, stop);
  }

  /**
   * Runs `start`, which adds its parts as they start. When it throws, every part added so far
   * stops (as {@link close}, with no time to wait) and the start's own error is rethrown.
   */
  async start<T>(start: () => Promise<T>): Promise<T> {
    try {
      return await start();
    } catch (err) {
      await this.close();
      throw err;
    }
  }

  /** Stops every part, latest step first, within `deadline` (performance.now() ms; now by default: no time to wait). Never rejects. */
  close(deadline: number = performance.now()): Promise<void> {
    this.closing ??= (async () => {
      for (const parts of [...this.steps].reverse()) await this.stopAll(parts, deadline);
    })();
    return this.closing;
  }

  private async stopAll(parts: ReadonlyMap<string, Stop>, deadline: number): Promise<void> {
    await Promise.all(
      [...parts].map(async ([part, stop]) => {
        try {
          await stop(deadline);
        } catch (err) {
          try {
            this.report(part, err);
          } catch {
            // A report that fails has nowhere to go; the other parts still stop.
          }
        }
      }),
    );
  }
}
