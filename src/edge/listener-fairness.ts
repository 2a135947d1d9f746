/**
 * What a connection is doing, as a listener's share sees it: `request_less` until its first
 * request (HTTP) or stream (HTTP/2) arrives, `busy` while one is in flight, `idle` in between.
 */
export type ConnectionState = 'request_less' | 'idle' | 'busy';
export const CONNECTION_STATES: readonly ConnectionState[] = ['request_less', 'idle', 'busy'];

/** What one peer address may hold of a listener's cap while others wait: a quarter, at least one. */
export function peerShareOf(cap: number): number {
  return Math.max(1, Math.floor(cap / 4));
}

/**
 * The peer a connection is counted to: its IPv4 address (an IPv4-mapped IPv6 one as IPv4), the
 * /64 of an IPv6 address (one host is handed a whole /64, so a single address would be no bound),
 * or `local` for a Unix socket.
 */
export function peerOf(address: string | undefined): string {
  if (address === undefined || address === '') return 'local';
  if (!address.includes(':')) return address;
  const lower = address.toLowerCase();
  if (lower.startsWith('::ffff:') && lower.includes('.')) return lower.slice('::ffff:'.length);
  const bare = lower.split('%')[0]!;
  const [head, tail] = bare.split('::') as [string, string | undefined];
  const front = head === '' ? [] : head.split(':');
  const back = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = tail === undefined ? front : [...front, ...Array<string>(Math.max(0, 8 - front.length - back.length)).fill('0'), ...back];
  return `${groups
    .slice(0, 4)
    .map((g) => (/^[0-9a-f]{1,4}$/.test(g) ? parseInt(g, 16).toString(16) : g))
    .join(':')}::/64`;
}

/** A connection a {@link ConnectionShare} holds. */
export class HeldConnection {
  /** Requests (HTTP) or streams (HTTP/2) in flight. */
  active = 0;
  /** Whether a request or stream ever came. */
  served = false;
  /** When it entered its state (performance.now() ms): of those in one state, the oldest goes first. */
  since: number;
  /** Counted by the share (false once released or let go). */
  held = true;

  constructor(
    readonly peer: string,
    /** Ends the connection (a socket destroyed, a session closed); called once, by the share. */
    readonly letGo: (state: ConnectionState) => void,
    now: number,
  ) {
    this.since = now;
  }

  get state(): ConnectionState {
    return this.active > 0 ? 'busy' : this.served ? 'idle' : 'request_less';
  }
}

/**
 * One listener's connections, fair to every peer address once the listener is full.
 *
 * Below the cap every connection is admitted, however many one peer holds (a proxy in front may
 * be the only peer there is). At the cap, a new connection is admitted only in place of another:
 * - a peer holding less than its share ({@link peerShareOf}) takes the place of an idle, else a
 *   request-less connection of the peer holding the most (of those holding more than it would);
 *   failing that, of an idle connection of anyone; failing that, of a busy connection of the
 *   heaviest peer if that one holds more than its share;
 * - a peer at or above its share may only give up one of its own idle, else request-less
 *   connections for the new one;
 * - otherwise the newcomer is refused.
 * Of the connections of one state the oldest in that state goes. So a peer holding every
 * connection with idle keep-alives or requests it never finishes sending cannot keep another out,
 * and what it loses first costs nothing (an idle connection) or is its own stalling.
 *
 * @example
 * const share = new ConnectionShare(256, (state) => evicted.labels(state).inc());
 * const held = share.admit(peerOf(socket.remoteAddress), () => socket.destroy());
 * if (held === null) socket.destroy(); // refused
 */
export class ConnectionShare {
  private open = 0;
  private readonly peers = new Map<string, Set<HeldConnection>>();
  /** Connections one peer may hold at the cap while others wait. */
  readonly peerShare: number;

  constructor(
    /** Connections at once (≥ 1). */
    readonly cap: number,
    private readonly onEvicted: (state: ConnectionState) => void = () => undefined,
    private readonly now: () => number = () => performance.now(),
  ) {
    if (!Number.isSafeInteger(cap) || cap < 1) throw new RangeError(`ConnectionShare: cap must be a positive integer, got ${cap}`);
    this.peerShare = peerShareOf(cap);
  }

  /** Connections held now. */
  get size(): number {
    return this.open;
  }

  /** Connections held by `peer` now. */
  heldBy(peer: string): number {
    return this.peers.get(peer)?.size ?? 0;
  }

  /** The most connections one peer holds now. */
  largestPeer(): number {
    let most = 0;
    for (const s of this.peers.values()) most = Math.max(most, s.size);
    return most;
  }

  /**
   * A new connection from `peer`: held, after letting another go when the listener is full, or
   * null when it is refused (the caller closes it).
   */
  admit(peer: string, letGo: (state: ConnectionState) => void): HeldConnection | null {
    if (this.open >= this.cap) {
      const victim = this.victimFor(peer);
      if (victim === undefined) return null;
      const state = victim.state;
      this.release(victim);
      victim.letGo(state);
      this.onEvicted(state);
    }
    const c = new HeldConnection(peer, letGo, this.now());
    let mine = this.peers.get(peer);
    if (mine === undefined) this.peers.set(peer, (mine = new Set()));
    mine.add(c);
    this.open++;
    return c;
  }

  /** A request or stream started on `c`. */
  begin(c: HeldConnection): void {
    c.served = true;
    if (c.active++ === 0) c.since = this.now();
  }

  /** A request or stream of `c` ended. */
  end(c: HeldConnection): void {
    if (c.active === 0) return;
    if (--c.active === 0) c.since = this.now();
  }

  /** `c` closed (or was let go): no longer counted. Idempotent. */
  release(c: HeldConnection): void {
    if (!c.held) return;
    c.held = false;
    const mine = this.peers.get(c.peer);
    if (mine === undefined || !mine.delete(c)) return;
    if (mine.size === 0) this.peers.delete(c.peer);
    this.open--;
  }

  /** Who makes room for a newcomer from `peer` at the cap; undefined: nobody, the newcomer is refused. */
  private victimFor(peer: string): HeldConnection | undefined {
    const mine = this.heldBy(peer);
    // At its share it may only trade one of its own: behind one address (a proxy, a pod's
    // loopback) a genuine client and a hostile one are the same peer, and the oldest idle or
    // request-less connection is the one least likely to be the newcomer's own client at work.
    if (mine >= this.peerShare) {
      const own = this.peers.get(peer);
      return own === undefined ? undefined : this.evictableOf(own);
    }
    // Scans: only at the cap, over at most `cap` connections.
    const heavier = [...this.peers].filter(([p, s]) => p !== peer && s.size > mine + 1).sort((a, b) => b[1].size - a[1].size);
    for (const [, s] of heavier) {
      const v = this.evictableOf(s);
      if (v !== undefined) return v;
    }
    let idle: HeldConnection | undefined;
    for (const s of this.peers.values()) idle = older(idle, oldestIn(s, 'idle'));
    if (idle !== undefined) return idle;
    const top = heavier[0]?.[1];
    return top !== undefined && top.size > this.peerShare ? oldestIn(top, 'busy') : undefined;
  }

  /** The oldest idle connection of a peer, else its oldest request-less one. */
  private evictableOf(s: Set<HeldConnection>): HeldConnection | undefined {
    return oldestIn(s, 'idle') ?? oldestIn(s, 'request_less');
  }
}

function oldestIn(s: Set<HeldConnection>, state: ConnectionState): HeldConnection | undefined {
  let found: HeldConnection | undefined;
  for (const c of s) if (c.state === state) found = older(found, c);
  return found;
}

function older(a: HeldConnection | undefined, b: HeldConnection | undefined): HeldConnection | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return b.since < a.since ? b : a;
}
