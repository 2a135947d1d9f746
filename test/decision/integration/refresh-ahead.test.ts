import { describe, expect, it, vi } from 'vitest';
import { testClock, useSidecar, type TestClock, type TestSidecar } from '../../helpers/sidecar.js';
import { allow, deny, type Reply, type ScriptedUpstream } from '../../helpers/upstream.js';
import { PATIENTLY } from '../../helpers/wait.js';

/**
 * Refresh-ahead (contract, the ALLOW cache; `--cache-refresh-ahead-ms`), on the real sidecar in
 * front of a scripted service on loopback. The wall clock is the test's (the monotonic one runs
 * real time, far from any death here), so "inside the window" is reached by moving the clock, not
 * by waiting.
 */
const KEY = 'flow-refresh';
const REQ = { userReference: 'user-hot', configKey: KEY };
const LIFE_MS = 60_000;
const WINDOW_MS = 10_000;

const fx = useSidecar();

async function setup(windowMs = WINDOW_MS): Promise<{ u: ScriptedUpstream; s: TestSidecar; clock: TestClock; allowFor: (lifeMs?: number) => () => Reply }> {
  const clock = testClock();
  const allowFor = (lifeMs = LIFE_MS) => (): Reply => ({ body: allow(KEY, clock.now() + lifeMs) });
  const { u, s } = await fx.start(allowFor(), { 'cache-safety-margin-ms': '0', 'cache-refresh-ahead-ms': String(windowMs), 'upstream-timeout-ms': '2000' }, { now: clock.now });
  return { u, s, clock, allowFor };
}

const refreshes = (s: TestSidecar, outcome: string): Promise<number> => s.metric('consent_sidecar_cache_refreshes_total', { outcome });
const validUntilOf = (a: { json: Record<string, unknown> | undefined }): number => Number(a.json?.validUntil);

describe('refresh-ahead', () => {
  it('an entry read inside the window is asked again in the background, once; every answer is the cache; the new ALLOW replaces it with its own death', async () => {
    const { u, s, clock } = await setup();
    const first = await s.check(REQ);
    expect(first.source).toBe('upstream');
    for (let i = 0; i < 5; i++) expect((await s.check(REQ)).source).toBe('cache'); // outside the window: nothing asked

    clock.advance(LIFE_MS - WINDOW_MS + 1); // 9,999 ms left
    const inWindow = await s.check(REQ);
    expect(inWindow.source).toBe('cache');
    expect(validUntilOf(inWindow)).toBe(validUntilOf(first));
    await vi.waitFor(async () => expect(await refreshes(s, 'allow')).toBe(1), PATIENTLY);
    const renewed = await s.check(REQ);
    expect(renewed.source).toBe('cache');
    expect(validUntilOf(renewed)).toBe(clock.now() + LIFE_MS);
    for (let i = 0; i < 5; i++) expect((await s.check(REQ)).source).toBe('cache');
    // The first call, the one refresh: the reads before the window, and after the renewal, asked nothing.
    expect(u.checks).toBe(2);
    expect(await s.metric('consent_sidecar_decisions_total', { source: 'upstream' })).toBe(1);
  });

  it('a DENY on refresh removes the entry at once: the next request goes to the service (the entry is not left to die)', async () => {
    const { u, s, clock } = await setup();
    await s.check(REQ);
    u.reply({ body: deny(KEY) });
    clock.advance(LIFE_MS - WINDOW_MS + 1);
    expect((await s.check(REQ)).json?.decision).toBe('ALLOW'); // served from the cache while the refresh runs
    await vi.waitFor(async () => expect(await refreshes(s, 'deny')).toBe(1), PATIENTLY);
    const next = await s.check(REQ);
    expect(next).toMatchObject({ source: 'upstream', json: { decision: 'DENY', configKey: KEY } });
    expect(u.checks).toBe(3);
  });

  it('no decision on refresh (the service fails) leaves the entry to die exactly when it would have, and never later', async () => {
    const { u, s, clock } = await setup();
    const first = await s.check(REQ);
    u.reply({ status: 500, body: '{}' });
    clock.advance(LIFE_MS - WINDOW_MS + 1);
    expect((await s.check(REQ)).source).toBe('cache');
    await vi.waitFor(async () => expect(await refreshes(s, 'no_decision')).toBe(1), PATIENTLY);
    const still = await s.check(REQ);
    expect(still.source).toBe('cache');
    expect(validUntilOf(still)).toBe(validUntilOf(first));
    clock.set(validUntilOf(first)); // its death
    const after = await s.check(REQ);
    expect(after.status).toBe(503);
    expect(after.source).toBe('fail-closed');
  });

  it('a refresh never extends an entry beyond what the newest answer allows: a shorter validUntil shortens it', async () => {
    const { u, s, clock, allowFor } = await setup();
    await s.check(REQ);
    // The refresh gets a shorter life; anything asked after it fails (so nothing renews it again).
    u.enqueue(allowFor(2000));
    u.reply({ status: 500, body: '{}' });
    clock.advance(LIFE_MS - WINDOW_MS + 1);
    await s.check(REQ);
    await vi.waitFor(async () => expect(await refreshes(s, 'allow')).toBe(1), PATIENTLY);
    const renewed = await s.check(REQ); // inside the window again: its own refresh fails
    expect(validUntilOf(renewed)).toBe(clock.now() + 2000);
    await vi.waitFor(async () => expect(await refreshes(s, 'no_decision')).toBe(1), PATIENTLY);
    clock.set(validUntilOf(renewed));
    expect((await s.check(REQ)).source).toBe('fail-closed');
  });

  it('many reads inside the window while the refresh is slow make one call, every one answered from the cache', async () => {
    const { u, s, clock } = await setup();
    await s.check(REQ);
    u.reply(() => ({ body: allow(KEY, clock.now() + LIFE_MS), delayMs: 300 }));
    clock.advance(LIFE_MS - WINDOW_MS + 1);
    const answers = await Promise.all(Array.from({ length: 100 }, () => s.check(REQ)));
    expect(answers.every((a) => a.source === 'cache')).toBe(true);
    await vi.waitFor(async () => expect(await refreshes(s, 'allow')).toBe(1), PATIENTLY);
    expect(u.checks).toBe(2);
  });

  it('off by default (0): an entry read just before its death is not asked again; its death is a miss', async () => {
    const { u, s, clock } = await setup(0);
    const first = await s.check(REQ);
    // 5 s before validUntil: inside any window, still alive (the service's Date header may
    // shorten a life by up to ~2 s against this test clock, which starts on a whole second).
    clock.set(validUntilOf(first) - 5000);
    expect((await s.check(REQ)).source).toBe('cache');
    clock.set(validUntilOf(first));
    expect((await s.check(REQ)).source).toBe('upstream');
    // the read before death asked nothing: the second call is the miss after it
    expect(u.checks).toBe(2);
    expect(await refreshes(s, 'allow')).toBe(0);
  });
});
