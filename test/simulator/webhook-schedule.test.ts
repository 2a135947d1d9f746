import { afterEach, describe, expect, it, vi } from 'vitest';
import { startSimulator, type SimulatorHandle } from '../../src/simulator/index.js';

let sim: SimulatorHandle | undefined;
afterEach(async () => {
  vi.useRealTimers();
  await sim?.close();
  sim = undefined;
});

/** Lets real I/O (a refused connection) complete while timers stay frozen. */
async function settleIo(done: () => boolean): Promise<void> {
  for (let i = 0; i < 2000 && !done(); i++) await new Promise((r) => setImmediate(r));
  if (!done()) throw new Error('I/O did not complete');
}

describe('delivery schedule in frozen time (timeScale 1)', () => {
  it('attempts at 0, 1, 3, 7, 15, 30, 45 and 60 minutes, then terminal', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const t0 = Date.UTC(2026, 0, 1);
    vi.setSystemTime(t0);
    sim = await startSimulator();
    sim.registerWebhookEndpoint({ url: 'http://127.0.0.1:9/dead', secret: 'whsec_x' });
    sim.emitEvent('consent_action.created', {});
    const attempts = () => sim!.deliveries()[0]!.attempts.length;
    for (let n = 1; n <= 8; n++) {
      await settleIo(() => attempts() === n);
      const timeline = sim.deliveries()[0]!;
      if (n < 8) {
        expect(timeline.state).toBe('retry_scheduled');
        // nothing happens one millisecond before the scheduled instant
        await vi.advanceTimersByTimeAsync(timeline.nextAttemptAt! - Date.now() - 1);
        expect(attempts()).toBe(n);
        await vi.advanceTimersByTimeAsync(1);
      }
    }
    const timeline = sim.deliveries()[0]!;
    expect(timeline.state).toBe('terminal');
    expect(timeline.attempts.map((a) => (a.startedAt - t0) / 60_000)).toEqual([0, 1, 3, 7, 15, 30, 45, 60]);
    expect(timeline.attempts.map((a) => a.timestampS)).toEqual(timeline.attempts.map((a) => Math.floor(a.startedAt / 1000)));
    await vi.advanceTimersByTimeAsync(3_600_000);
    expect(attempts()).toBe(8);
  });
});
