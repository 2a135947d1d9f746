import { performance } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { Lifecycle, type Stop } from '../../src/assembly/lifecycle.js';

/** A part whose stop is recorded when called and finishes only when the test says so. */
function heldPart(name: string, calls: string[]): { stop: Stop; done: Promise<void>; finish(): void } {
  let finish!: () => void;
  const done = new Promise<void>((resolve) => {
    finish = resolve;
  });
  return {
    stop: () => {
      calls.push(name);
      return done;
    },
    done,
    finish: () => finish(),
  };
}

/** Lets every promise callback that is ready run (no timer, no wall clock). */
const settled = async (): Promise<void> => {
  for (let i = 0; i < 10; i++) await Promise.resolve();
};

function lifecycle(): { life: Lifecycle; reported: [string, unknown][] } {
  const reported: [string, unknown][] = [];
  return { life: new Lifecycle((part, err) => reported.push([part, err])), reported };
}

describe('Lifecycle', () => {
  it('stops the latest step first, each only once the one after it has stopped', async () => {
    const { life } = lifecycle();
    const calls: string[] = [];
    const [a, b, c] = ['tracing', 'fleet', 'listeners'].map((n) => heldPart(n, calls)) as [ReturnType<typeof heldPart>, ReturnType<typeof heldPart>, ReturnType<typeof heldPart>];
    life.add('tracing', a.stop);
    life.add('fleet', b.stop);
    life.add('listeners', c.stop);
    const closed = life.close();
    await settled();
    expect(calls).toEqual(['listeners']);
    c.finish();
    await settled();
    expect(calls).toEqual(['listeners', 'fleet']);
    b.finish();
    await settled();
    expect(calls).toEqual(['listeners', 'fleet', 'tracing']);
    a.finish();
    await closed;
  });

  it('stops the parts of one step together: none waits for another to finish first', async () => {
    const { life, reported } = lifecycle();
    const calls: string[] = [];
    const webhooks = heldPart('webhooks', calls);
    const fleet = heldPart('fleet', calls);
    life.add('fleet', fleet.stop);
    const work = life.step();
    work.add('webhooks', webhooks.stop);
    // A reconciler whose hand-over in flight ends only when the webhook wing's client closes.
    let handedOver = false;
    work.add('reconciler', () => {
      calls.push('reconciler');
      return webhooks.done.then(() => void (handedOver = true));
    });
    const closed = life.close();
    await settled();
    expect(calls).toEqual(['webhooks', 'reconciler']);
    expect(calls).not.toContain('fleet');
    webhooks.finish();
    await settled();
    expect(handedOver).toBe(true);
    expect(calls).toContain('fleet');
    fleet.finish();
    await closed;
    expect(reported).toEqual([]);
  });

  it('a part that fails to stop (throws or rejects) is reported by name, and every other part still stops', async () => {
    const { life, reported } = lifecycle();
    const stopped: string[] = [];
    const thrown = new Error('thrown');
    const rejected = new Error('rejected');
    life.add('first', () => void stopped.push('first'));
    life.add('throws', () => {
      throw thrown;
    });
    const step = life.step();
    step.add('rejects', () => Promise.reject(rejected));
    step.add('beside', () => void stopped.push('beside'));
    life.add('last', () => void stopped.push('last'));
    await expect(life.close()).resolves.toBeUndefined();
    expect(stopped).toEqual(['last', 'beside', 'first']);
    expect(reported).toEqual([
      ['rejects', rejected],
      ['throws', thrown],
    ]);
  });

  it('a report that throws stops nothing else from stopping', async () => {
    const life = new Lifecycle(() => {
      throw new Error('the logger is gone');
    });
    const stopped: string[] = [];
    life.add('first', () => void stopped.push('first'));
    life.add('fails', () => Promise.reject(new Error('x')));
    await expect(life.close()).resolves.toBeUndefined();
    expect(stopped).toEqual(['first']);
  });

  it('close stops each part once, however often it is called, and every call waits for the same end', async () => {
    const { life } = lifecycle();
    const calls: string[] = [];
    const part = heldPart('part', calls);
    life.add('part', part.stop);
    const first = life.close();
    const second = life.close(performance.now() + 60_000);
    expect(second).toBe(first);
    part.finish();
    await first;
    await life.close();
    expect(calls).toEqual(['part']);
  });

  it("hands every part the shutdown's deadline; by default, now: no time to wait", async () => {
    const { life } = lifecycle();
    const seen: number[] = [];
    life.add('a', (d) => void seen.push(d));
    life.add('b', (d) => void seen.push(d));
    const deadline = performance.now() + 30_000;
    await life.close(deadline);
    expect(seen).toEqual([deadline, deadline]);

    const other = lifecycle().life;
    let given = Number.NaN;
    other.add('a', (d) => void (given = d));
    const before = performance.now();
    await other.close();
    expect(given).toBeGreaterThanOrEqual(before);
    expect(given).toBeLessThanOrEqual(performance.now());
  });

  it('a part added once closing has begun is stopped at once, and only once', async () => {
    const { life } = lifecycle();
    const calls: string[] = [];
    const step = life.step();
    const held = heldPart('held', calls);
    life.add('held', held.stop);
    const closed = life.close();
    await settled();
    expect(calls).toEqual(['held']);
    // Into a step the close has not reached yet, and into a step of its own.
    step.add('late', () => void calls.push('late'));
    life.add('later', () => void calls.push('later'));
    expect(calls).toEqual(['held', 'late', 'later']);
    held.finish();
    await closed;
    expect(calls).toEqual(['held', 'late', 'later']);
  });

  it('refuses two parts of one name in a step (the report could not tell them apart)', () => {
    const step = lifecycle().life.step();
    step.add('fleet', () => undefined);
    expect(() => step.add('fleet', () => undefined)).toThrow(RangeError);
  });

  describe('start', () => {
    it('when the start fails, stops what it had started, latest first, and rethrows the start’s own error', async () => {
      const { life, reported } = lifecycle();
      const stopped: string[] = [];
      const failure = new Error('--webhook-listen 127.0.0.1:1: cannot listen (EACCES)');
      const stopFailure = new Error('fleet did not close');
      const started = life.start(async () => {
        life.add('tracing', () => void stopped.push('tracing'));
        life.add('decisions', () => void stopped.push('decisions'));
        life.add('fleet', () => {
          stopped.push('fleet');
          throw stopFailure;
        });
        await Promise.resolve();
        throw failure;
      });
      await expect(started).rejects.toBe(failure);
      expect(stopped).toEqual(['fleet', 'decisions', 'tracing']);
      expect(reported).toEqual([['fleet', stopFailure]]);
    });

    it('when the start succeeds, stops nothing and hands its result back', async () => {
      const { life } = lifecycle();
      const stopped: string[] = [];
      const result = await life.start(async () => {
        life.add('tracing', () => void stopped.push('tracing'));
        return 'urls';
      });
      expect(result).toBe('urls');
      expect(stopped).toEqual([]);
      await life.close();
      expect(stopped).toEqual(['tracing']);
    });
  });
});
