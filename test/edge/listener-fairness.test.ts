import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ConnectionShare, peerOf, peerShareOf, type ConnectionState, type HeldConnection } from '../../src/edge/listener-fairness.js';

/** A share on a clock the test moves, recording whom it lets go. */
function shareOf(cap: number) {
  let t = 0;
  const gone: { peer: string; state: ConnectionState }[] = [];
  const share = new ConnectionShare(cap, () => undefined, () => t);
  const admit = (peer: string): HeldConnection | null => {
    t++;
    const h: HeldConnection | null = share.admit(peer, (state) => gone.push({ peer, state }));
    return h;
  };
  return { share, admit, gone, tick: () => t++ };
}

describe('peerOf: the address a connection is counted to', () => {
  it.each([
    ['127.0.0.2', '127.0.0.2'],
    ['::ffff:10.1.2.3', '10.1.2.3'],
    ['2001:db8:1:2:aaaa:bbbb:cccc:dddd', '2001:db8:1:2::/64'],
    ['2001:DB8:1:2::5', '2001:db8:1:2::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    [undefined, 'local'],
    ['', 'local'],
  ])('%s → %s', (address, peer) => {
    expect(peerOf(address)).toBe(peer);
  });

  it('two addresses of one /64 are one peer; of two /64s, two', () => {
    expect(peerOf('2001:db8:1:2::1')).toBe(peerOf('2001:db8:1:2:ffff::9'));
    expect(peerOf('2001:db8:1:2::1')).not.toBe(peerOf('2001:db8:1:3::1'));
  });
});

describe('ConnectionShare', () => {
  it('a quarter of the cap, at least one', () => {
    expect([peerShareOf(1), peerShareOf(3), peerShareOf(4), peerShareOf(256), peerShareOf(1024)]).toEqual([1, 1, 1, 64, 256]);
  });

  it('below the cap admits everyone, however many one peer holds', () => {
    const { share, admit, gone } = shareOf(8);
    for (let i = 0; i < 8; i++) expect(admit('a')).not.toBeNull();
    expect([share.size, share.heldBy('a'), share.largestPeer(), gone]).toEqual([8, 8, 8, []]);
  });

  it('at the cap, a peer under its share takes the place of the hog\'s idle connection first, then a request-less one', () => {
    const { share, admit, gone } = shareOf(8);
    const hog = Array.from({ length: 8 }, () => admit('hog')!);
    share.begin(hog[5]!);
    share.end(hog[5]!); // idle now, the youngest state change of all
    expect(admit('fair')).not.toBeNull();
    expect(gone).toEqual([{ peer: 'hog', state: 'idle' }]);
    expect(admit('fair')).not.toBeNull();
    expect(gone[1]).toEqual({ peer: 'hog', state: 'request_less' });
    // The oldest request-less one went: hog[0].
    expect(hog[0]!.held).toBe(false);
    expect([share.size, share.heldBy('hog'), share.heldBy('fair')]).toEqual([8, 6, 2]);
  });

  it('a peer at its share only gives up one of its own idle, else request-less connections; all busy, it is refused', () => {
    const { share, admit, gone } = shareOf(8);
    const mine = [admit('a')!, admit('a')!];
    for (let i = 0; i < 6; i++) admit(`p${i}`);
    share.begin(mine[1]!);
    share.end(mine[1]!);
    // a holds 2, its share: its own idle one goes first (never another peer's request-less one).
    const third = admit('a');
    expect(third).not.toBeNull();
    expect(gone).toEqual([{ peer: 'a', state: 'idle' }]);
    expect(mine[1]!.held).toBe(false);
    // Then its oldest request-less one.
    const fourth = admit('a');
    expect(fourth).not.toBeNull();
    expect(gone[1]).toEqual({ peer: 'a', state: 'request_less' });
    expect(mine[0]!.held).toBe(false);
    // All of a's busy: refused, and nobody else let go.
    share.begin(third!);
    share.begin(fourth!);
    expect(admit('a')).toBeNull();
    expect(gone).toHaveLength(2);
    expect(share.size).toBe(8);
  });

  it('a busy connection goes only when its peer holds more than its share, and only when nothing idle or request-less can', () => {
    const { share, admit, gone } = shareOf(8);
    for (let i = 0; i < 7; i++) share.begin(admit('hog')!);
    share.begin(admit('x')!);
    // hog holds 7 > 2, all busy; x's idle... none: the hog's oldest busy connection goes.
    expect(admit('fair')).not.toBeNull();
    expect(gone).toEqual([{ peer: 'hog', state: 'busy' }]);
    // Four peers at their share, all busy: a fifth is refused.
    const { share: s2, admit: a2 } = shareOf(8);
    for (const p of ['a', 'b', 'c', 'd']) for (let i = 0; i < 2; i++) s2.begin(a2(p)!);
    expect(a2('e')).toBeNull();
  });

  it('an idle connection of anyone makes room when no heavier peer has one', () => {
    const { share, admit, gone } = shareOf(4);
    const a = admit('a')!;
    share.begin(a);
    share.end(a);
    for (const p of ['b', 'c', 'd']) share.begin(admit(p)!);
    expect(admit('e')).not.toBeNull();
    expect(gone).toEqual([{ peer: 'a', state: 'idle' }]);
  });

  it('release is idempotent, and a connection let go is no longer counted even before it closes', () => {
    const { share, admit } = shareOf(2);
    const a = admit('a')!;
    share.release(a);
    share.release(a);
    expect(share.size).toBe(0);
    expect(share.heldBy('a')).toBe(0);
  });

  it('rejects a cap that is not a positive integer', () => {
    expect(() => new ConnectionShare(0)).toThrow(RangeError);
    expect(() => new ConnectionShare(1.5)).toThrow(RangeError);
  });

  it('property: the cap holds; nobody at or above its share takes more than its own idle or request-less connection\'s place; busy goes only from a peer above its share', () => {
    type Op = { kind: 'admit'; peer: number } | { kind: 'begin' | 'end' | 'close'; index: number };
    const op = fc.oneof(
      { arbitrary: fc.record({ kind: fc.constant('admit' as const), peer: fc.integer({ min: 0, max: 4 }) }), weight: 3 },
      { arbitrary: fc.record({ kind: fc.constantFrom('begin' as const, 'begin' as const, 'end' as const, 'close' as const), index: fc.nat() }), weight: 2 },
    );
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 12 }), fc.array(op, { maxLength: 200 }), (cap, ops: Op[]) => {
        let t = 0;
        const share = new ConnectionShare(cap, () => undefined, () => t++);
        const live: HeldConnection[] = [];
        // Each connection's letGo names it, and the state it was let go in.
        const lettings: { victim: HeldConnection; state: ConnectionState }[] = [];
        for (const o of ops) {
          if (o.kind !== 'admit') {
            const open = live.filter((c) => c.held);
            const c = open[o.index % Math.max(1, open.length)];
            if (c === undefined) continue;
            if (o.kind === 'begin') share.begin(c);
            else if (o.kind === 'end') share.end(c);
            else share.release(c);
            continue;
          }
          const peer = `p${o.peer}`;
          const full = share.size >= cap;
          const mine = share.heldBy(peer);
          const heldBy = new Map(live.filter((c) => c.held).map((c) => [c.peer, share.heldBy(c.peer)]));
          const seen = lettings.length;
          const self: { c?: HeldConnection } = {};
          const h = share.admit(peer, (state) => lettings.push({ victim: self.c!, state }));
          const gone = lettings.slice(seen);
          if (h !== null) {
            self.c = h;
            live.push(h);
          }
          if (share.size > cap) return false;
          if (!full) {
            // Below the cap: admitted, nobody let go.
            if (h === null || gone.length > 0) return false;
            continue;
          }
          if (gone.length > 1 || (h === null) !== (gone.length === 0)) return false;
          const g = gone[0];
          if (g === undefined) continue;
          if (mine >= share.peerShare && (g.victim.peer !== peer || g.state === 'busy')) return false;
          if (g.state === 'busy' && (heldBy.get(g.victim.peer) ?? 0) <= share.peerShare) return false;
        }
        return true;
      }),
      { numRuns: 1000 },
    );
  });
});

