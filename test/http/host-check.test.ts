import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { hostGuard } from '../../src/http/host-check.js';

/** The two things the guard reads of a request: its raw headers and its socket's peer port. */
const req = (rawHeaders: string[], remotePort: number | undefined): IncomingMessage => ({ rawHeaders, socket: { remotePort } }) as unknown as IncomingMessage;

describe('hostGuard', () => {
  it('on TCP: loopback names and --allowed-host pass, any other name is refused', () => {
    const guard = hostGuard(['consent-sidecar.internal']);
    for (const host of ['localhost:7700', '127.0.0.1', '[::1]:7700', 'consent-sidecar.internal']) expect(guard(req(['Host', host], 51000)), host).toBe(true);
    expect(guard(req(['Host', 'evil.example'], 51000))).toBe(false);
  });

  it('on TCP, a socket without a peer port (already destroyed) is judged by its Host all the same', () => {
    const guard = hostGuard([]);
    expect(guard(req(['Host', 'evil.example'], undefined))).toBe(false);
    expect(guard(req(['Host', 'localhost'], undefined))).toBe(true);
  });

  it('on a Unix socket listener, every Host passes (no name resolves to it)', () => {
    const guard = hostGuard([], true);
    expect(guard(req(['Host', 'evil.example'], undefined))).toBe(true);
  });

  it('two Host fields are refused, whatever they say', () => {
    expect(hostGuard([])(req(['Host', 'localhost', 'host', 'localhost'], 51000))).toBe(false);
  });
});
