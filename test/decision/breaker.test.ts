import { describe, expect, it } from 'vitest';
import { CircuitBreaker, type BreakerState } from '../../src/decision/index.js';

function setup() {
  let t = 0;
  const states: BreakerState[] = [];
  const breaker = new CircuitBreaker({ failureThreshold: 3, cooldownMs: 1000, now: () => t, onStateChange: (s) => states.push(s) });
  return { breaker, states, advance: (ms: number) => (t += ms) };
}

describe('CircuitBreaker', () => {
  it('opens after consecutive failures and refuses at once while open', () => {
    const { breaker, states } = setup();
    for (let i = 0; i < 3; i++) breaker.failure(breaker.tryAcquire()!);
    expect(breaker.state).toBe('open');
    expect(breaker.tryAcquire()).toBeNull();
    expect(states).toEqual(['open']);
  });

  it('a success resets the count', () => {
    const { breaker } = setup();
    breaker.failure(breaker.tryAcquire()!);
    breaker.failure(breaker.tryAcquire()!);
    breaker.success(breaker.tryAcquire()!);
    breaker.failure(breaker.tryAcquire()!);
    expect(breaker.state).toBe('closed');
  });

  it('lets one probe through after the cooldown; success closes, failure reopens', () => {
    const { breaker, states, advance } = setup();
    for (let i = 0; i < 3; i++) breaker.failure(breaker.tryAcquire()!);
    advance(999);
    expect(breaker.tryAcquire()).toBeNull();
    advance(1);
    const probe = breaker.tryAcquire();
    expect(probe).toEqual({ probe: true });
    expect(breaker.tryAcquire()).toBeNull();
    breaker.failure(probe!);
    expect(breaker.state).toBe('open');
    advance(1000);
    const second = breaker.tryAcquire()!;
    breaker.success(second);
    expect(breaker.state).toBe('closed');
    expect(states).toEqual(['open', 'half_open', 'open', 'half_open', 'closed']);
  });

  it('a neutral probe (a 4xx: the service is alive) closes it', () => {
    const { breaker, advance } = setup();
    for (let i = 0; i < 3; i++) breaker.failure(breaker.tryAcquire()!);
    advance(1000);
    breaker.neutral(breaker.tryAcquire()!);
    expect(breaker.state).toBe('closed');
  });

  it('a released ticket (never sent: overload) counts for nothing: it neither adds to nor resets the failures', () => {
    const { breaker } = setup();
    breaker.failure(breaker.tryAcquire()!);
    breaker.failure(breaker.tryAcquire()!);
    for (let i = 0; i < 100; i++) breaker.release(breaker.tryAcquire()!);
    expect(breaker.state).toBe('closed');
    breaker.failure(breaker.tryAcquire()!);
    expect(breaker.state).toBe('open');
  });

  it('a released probe neither closes nor reopens it: the next request is the probe', () => {
    const { breaker, states, advance } = setup();
    for (let i = 0; i < 3; i++) breaker.failure(breaker.tryAcquire()!);
    advance(1000);
    const probe = breaker.tryAcquire()!;
    expect(probe).toEqual({ probe: true });
    breaker.release(probe);
    expect(breaker.state).toBe('half_open');
    const next = breaker.tryAcquire();
    expect(next).toEqual({ probe: true });
    breaker.success(next!);
    expect(states).toEqual(['open', 'half_open', 'closed']);
  });

  it('rejects nonsense options at construction', () => {
    expect(() => new CircuitBreaker({ failureThreshold: 0, cooldownMs: 1 })).toThrow(RangeError);
  });
});
