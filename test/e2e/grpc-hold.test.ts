import { afterEach, describe, expect, it } from 'vitest';
import { startGrpcHold, type GrpcHold } from '../bench/grpc-hold.js';
import { rssOf } from '../bench/webhook-flood.js';
import { checkRequest, GrpcClient } from '../helpers/grpc.js';
import { ServeProcess } from '../helpers/serve-process.js';
import { allow, startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { PATIENTLY, until } from '../helpers/wait.js';

/**
 * 48 gRPC streams each holding 6 MiB of a declared 8 MiB CheckRequest (--grpc-max-message-bytes
 * at its 8 MiB most, so nothing is refused at the prefix), against a real `serve` whose heap is
 * capped and whose RSS must stay inside what a 256 MiB cgroup allows: it survives, and HTTP and
 * gRPC decisions keep answering while the hold lasts. The load runs in a process of its own.
 * (On the grpc-js listener the 48 streams were held whole: 288 MiB of buffers, the process killed
 * by a 256 MiB cgroup.)
 */
const MEMORY_BOUND_BYTES = 256 * 1024 * 1024;
const MiB = 1024 * 1024;

let upstream: ScriptedUpstream | undefined;
let serve: ServeProcess | undefined;
let hold: GrpcHold | undefined;
let client: GrpcClient | undefined;

afterEach(async () => {
  hold?.stop();
  client?.close();
  await serve?.stop();
  await upstream?.close();
  [hold, client, serve, upstream] = [undefined, undefined, undefined, undefined];
});

describe('unfinished CheckRequests on the gRPC listener', () => {
  it('48 streams × 6 MiB of a declared 8 MiB: RSS stays under 256 MiB, the process survives, HTTP and gRPC decisions keep answering', async () => {
    upstream = await startUpstream((r) => ({ body: allow((JSON.parse(r.body) as { configKey: string }).configKey, Date.now() + 600_000) }));
    serve = new ServeProcess(
      {
        'upstream-url': upstream.url,
        'api-key': 'k',
        listen: '127.0.0.1:0',
        'admin-listen': '127.0.0.1:0',
        'grpc-listen': '127.0.0.1:0',
        'redec-reconcile-interval-ms': '0',
        'grpc-max-message-bytes': String(8 * MiB),
        // Longer than the test: what the listener took in stays held while the decisions are asked.
        'grpc-request-timeout-ms': '600000',
      },
      {},
      [],
      // The heap a 256 MiB container leaves room for; buffers live outside it, hence the RSS bound.
      ['--max-old-space-size=160'],
    );
    await serve.start();
    const pid = serve.pid!;
    let peak = rssOf(pid);
    let sampling = true;
    const sampler = (async () => {
      while (sampling && serve?.running) {
        peak = Math.max(peak, rssOf(pid));
        await new Promise((r) => setTimeout(r, 50)); // sampling pace, not a wait for anything
      }
    })();

    hold = startGrpcHold({ target: serve.urls.grpc!, connections: 4, streamsPerConnection: 12, declared: 8 * MiB, push: 6 * MiB });
    const outcome = await hold.settled;
    expect(outcome.held + outcome.answered + outcome.reset).toBe(48);
    expect(serve.running).toBe(true);

    // While the hold lasts: a check on the HTTP decision API, a Check over gRPC, each a decision.
    const http = await serve.check('alice', 'marketing-email');
    expect([http.status, http.json.decision]).toEqual([200, 'ALLOW']);
    client = new GrpcClient(serve.urls.grpc!);
    const grpc = await client.check(checkRequest({ 'x-user-reference': 'bob' }, { configKey: 'marketing-email' }));
    expect(grpc.err).toBeUndefined();
    expect(grpc.res!.status?.code ?? 0).toBe(0);

    sampling = false;
    await sampler;
    peak = Math.max(peak, rssOf(pid));
    expect(serve.running).toBe(true);
    expect(peak, `peak RSS ${(peak / MiB).toFixed(0)} MiB; streams ${JSON.stringify(outcome)}`).toBeLessThan(MEMORY_BOUND_BYTES);
    // What the listener holds is the budget's, nothing like the 288 MiB pushed.
    expect(await serve.metric('consent_sidecar_grpc_unfinished_bytes')).toBeLessThanOrEqual(16 * MiB);
    await until(async () => (await serve!.metric('consent_sidecar_fail_closed_total', { cause: 'overload' })) >= 1, 'streams refused for the budget, counted');
  }, 120_000);

  it('4,000 streams that each declare 8 MiB and send only the prefix: nothing is allocated for a declared length', async () => {
    upstream = await startUpstream((r) => ({ body: allow((JSON.parse(r.body) as { configKey: string }).configKey, Date.now() + 600_000) }));
    serve = new ServeProcess(
      { 'upstream-url': upstream.url, 'api-key': 'k', listen: '127.0.0.1:0', 'admin-listen': '127.0.0.1:0', 'grpc-listen': '127.0.0.1:0', 'redec-reconcile-interval-ms': '0', 'grpc-max-message-bytes': String(8 * MiB), 'grpc-request-timeout-ms': '600000', 'grpc-max-concurrent-streams': '1000' },
      {},
      [],
      ['--max-old-space-size=160'],
    );
    await serve.start();
    // 1,000 streams on each connection (the default is 100 per connection): all 4,000 held, under --grpc-max-streams (4,096).
    hold = startGrpcHold({ target: serve.urls.grpc!, connections: 4, streamsPerConnection: 1000, declared: 8 * MiB, push: 0 });
    const outcome = await hold.settled;
    // Every stream holds its 5 bytes: 32 GiB declared, none of it taken.
    expect(outcome).toEqual({ held: 4000, answered: 0, reset: 0 });
    // Held by the server, not queued in the client behind SETTINGS_MAX_CONCURRENT_STREAMS.
    await expect.poll(() => serve!.metric('consent_sidecar_grpc_streams'), PATIENTLY).toBe(4000);
    expect(serve.running).toBe(true);
    client = new GrpcClient(serve.urls.grpc!);
    const grpc = await client.check(checkRequest({ 'x-user-reference': 'carol' }, { configKey: 'marketing-email' }));
    expect(grpc.err).toBeUndefined();
    expect(grpc.res!.status?.code ?? 0).toBe(0);
    expect(rssOf(serve.pid!)).toBeLessThan(MEMORY_BOUND_BYTES);
    expect(await serve.metric('consent_sidecar_grpc_unfinished_bytes')).toBeLessThanOrEqual(4000 * 5);
  }, 120_000);
});
