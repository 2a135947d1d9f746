import { spawn, type ChildProcess } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { staticSecret } from '../../src/config/index.js';
import { DecisionError, UpstreamClient } from '../../src/decision/index.js';
import { PYTHON } from '../helpers/toolchains.js';

// A service whose address stops answering (its pod gone, a partition): connections are never
// made, so a check's request is never written. The time a check held a connection that never
// opened is a lower bound of the service's answer time, and the admission's estimate must take it
// (else, under load, every check is sent late from the queue, no timeout counts, and the breaker
// never opens: src/decision/upstream-client.ts, CheckCall.timeout). The address is a real
// listening socket in another process that never accepts: its backlog of one fills and every
// further connect waits unanswered.

let listener: ChildProcess | undefined;
let client: UpstreamClient | undefined;
const fillers: Socket[] = [];
afterEach(async () => {
  await client?.destroy();
  for (const s of fillers.splice(0)) s.destroy();
  listener?.kill('SIGKILL');
  client = listener = undefined;
});

/** A port whose listening socket (backlog 0) is never accepted from; its first connect fills the queue. */
async function neverAccepting(): Promise<number> {
  listener = spawn(PYTHON, ['-c', 'import socket,sys,time\ns=socket.socket()\ns.bind(("127.0.0.1",0))\ns.listen(0)\nprint(s.getsockname()[1],flush=True)\ntime.sleep(600)'], { stdio: ['ignore', 'pipe', 'inherit'] });
  listener.on('error', (err) => {
    throw new Error(`${PYTHON} could not start (install python3: bash test/setup.sh): ${err.message}`);
  });
  const line = await new Promise<string>((resolve, reject) => {
    let out = '';
    listener!.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('\n')) resolve(out.trim());
    });
    listener!.on('exit', (code) => reject(new Error(`the never-accepting listener exited (${code})`)));
  });
  return Number(line);
}

describe('a service whose address does not answer connects', () => {
  it('a check that never got its request written times out, and the estimate takes that wait as a lower bound of the answer time', async () => {
    const port = await neverAccepting();
    // The listener's queue filled first: one connection the kernel completes and queues, then every
    // further one (the client's) waits unanswered.
    const first = connect(port, '127.0.0.1');
    fillers.push(first);
    await new Promise<void>((resolve, reject) => first.once('connect', resolve).once('error', reject));
    fillers.push(connect(port, '127.0.0.1').on('error', () => undefined));
    const timeoutMs = 600;
    client = new UpstreamClient({ baseUrl: new URL(`http://127.0.0.1:${port}`), apiKey: staticSecret('k', 'test'), timeoutMs }, { connections: 4 });
    const before = client.admission.latencyMs;
    expect(before).toBeLessThan(timeoutMs / 2);
    const outcomes = await Promise.all(
      Array.from({ length: 4 }, (_, i) =>
        client!.check(JSON.stringify({ userReference: `u${i}`, configKey: 'k' })).then(
          () => 'answered',
          (err: unknown) => (err instanceof DecisionError ? `${err.code}: ${err.message}` : String(err)),
        ),
      ),
    );
    // None was written: each waited for a connection that never opened.
    expect(outcomes.every((o) => o.startsWith('ERR_UPSTREAM_TIMEOUT: no connection to the service')), outcomes.join('\n')).toBe(true);
    // Sent at once (a fair budget), each waited the whole deadline for a connection: the estimate rose to about that.
    expect(client.admission.latencyMs).toBeGreaterThan(timeoutMs / 2);
  });
});
