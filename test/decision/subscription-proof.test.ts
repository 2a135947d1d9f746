import { describe, expect, it } from 'vitest';
import { SubscriptionProof } from '../../src/decision/subscription-proof.js';

// A keep-alive's echo says the subscription delivers now; only a read that reached the head says
// nothing was missed. A replica that learns it missed a nudge (or whose read failed) while a
// keep-alive is out must not take that keep-alive's echo as proof again: it would go back to the
// quiet poll and stop reading, serving from its cache what the missed revocation purges.

function proof() {
  const changes: boolean[] = [];
  const p = new SubscriptionProof({ echoWaitMs: 60_000, changed: (live) => changes.push(live) });
  const read = p.ticket('read-1');
  p.readReachedHead(read);
  p.echoed('read-1');
  return { p, changes };
}

describe('SubscriptionProof', () => {
  it('a read that reached the head, echoed, proves the subscription', () => {
    const { p, changes } = proof();
    expect(p.isLive).toBe(true);
    expect(changes).toEqual([true]);
  });

  it('a keep-alive echoed while the proof holds keeps it', () => {
    const { p } = proof();
    const settled: boolean[] = [];
    expect(p.keepAlive(p.ticket('ka-1'), 60_000, (ok) => settled.push(ok))).toBe(true);
    p.echoed('ka-1');
    expect(settled).toEqual([true]);
    expect(p.isLive).toBe(true);
  });

  it('a nudge found missing while a keep-alive is out: that keep-alive\'s echo proves nothing, only a read\'s does', () => {
    const { p, changes } = proof();
    expect(p.keepAlive(p.ticket('ka-1'), 60_000, () => undefined)).toBe(true);
    p.missing();
    expect(p.isLive).toBe(false);
    p.echoed('ka-1');
    expect(p.isLive).toBe(false);
    expect(changes).toEqual([true, false]);
    // A read that reaches the head proves it again.
    p.readReachedHead(p.ticket('read-2'));
    p.echoed('read-2');
    expect(p.isLive).toBe(true);
    expect(changes).toEqual([true, false, true]);
  });

  it('a read failed while a keep-alive is out: the same', () => {
    const { p } = proof();
    expect(p.keepAlive(p.ticket('ka-1'), 60_000, () => undefined)).toBe(true);
    p.lost(p.lastHeard);
    p.echoed('ka-1');
    expect(p.isLive).toBe(false);
  });
});
