import { Metadata } from '@grpc/grpc-js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ServeProcess } from '../helpers/serve-process.js';
import { startTestSidecar } from '../helpers/sidecar.js';
import { checkRequest, GrpcClient, metadataOf } from '../helpers/grpc.js';
import { allow, startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { eventually, PATIENTLY } from '../helpers/wait.js';

// A real `node dist/cli.js serve` with --grpc-listen, as a pod runs it: gRPC health says SERVING,
// then NOT_SERVING on SIGTERM (a Watch sees the change), and a Check in flight when the drain
// starts is still answered before the process exits.

const KEY = 'marketing-email';

let upstream: ScriptedUpstream | undefined;
let serve: ServeProcess | undefined;
let client: GrpcClient | undefined;

afterEach(async () => {
  client?.close();
  await serve?.stop();
  await upstream?.close();
  [client, serve, upstream] = [undefined, undefined, undefined];
});

describe('gRPC health and drain on a real serve process', () => {
  it('SERVING while ready, NOT_SERVING on SIGTERM (Watch), and the call in flight answered before exit', async () => {
    upstream = await startUpstream();
    let release = (): void => undefined;
    const held = new Promise<void>((r) => (release = r));
    upstream.reply({ hold: held, body: allow(KEY, Date.now() + 60_000) });
    serve = new ServeProcess({
      'upstream-url': upstream.url,
      'api-key': 'k',
      listen: '127.0.0.1:0',
      'admin-listen': '127.0.0.1:0',
      'grpc-listen': '127.0.0.1:0',
      'redec-reconcile-interval-ms': '0',
      // The service holds every call: the start-up key check would be the one waited for below.
      'api-key-check': 'off',
      'shutdown-timeout-ms': '20000',
      'upstream-timeout-ms': '20000',
    });
    await serve.start();
    expect(serve.urls.grpc).toMatch(/^127\.0\.0\.1:\d+$/);
    client = new GrpcClient(serve.urls.grpc!);
    expect(await client.healthCheck()).toEqual({ status: 'SERVING' });

    const seen: string[] = [];
    let ended = false;
    const watch = client.health.Watch({ service: '' });
    watch.on('data', (m: { status?: string }) => seen.push(m.status ?? 'UNKNOWN'));
    watch.on('error', () => undefined);
    watch.on('end', () => (ended = true));
    await vi.waitFor(() => expect(seen).toEqual(['SERVING']), PATIENTLY);

    // A check the service holds: in flight when SIGTERM comes.
    const inFlight = new Promise<{ code: number; source: unknown }>((resolve, reject) => {
      client!.authz.Check(checkRequest({ 'x-user-reference': 'alice' }, { configKey: KEY }), new Metadata(), {}, (err, res) => {
        if (err) reject(err);
        else resolve({ code: (res as { status?: { code?: number } }).status?.code ?? 0, source: metadataOf(res as never).source });
      });
    });
    await upstream.waitForCount(1);
    const stopping = serve.stop();
    await vi.waitFor(() => expect(seen).toEqual(['SERVING', 'NOT_SERVING']), PATIENTLY);
    await vi.waitFor(() => expect(ended).toBe(true), PATIENTLY);
    release();
    expect(await inFlight).toEqual({ code: 0, source: 'upstream' });
    await stopping;
    expect(serve.logs().some((l) => l.event === 'stopped')).toBe(true);
  });

  it('a call still in flight when --shutdown-timeout-ms runs out is cut, and the listener closes', async () => {
    upstream = await startUpstream({ fault: 'hang' });
    const s = await startTestSidecar(upstream.url, { 'grpc-listen': '127.0.0.1:0', 'shutdown-timeout-ms': '300', 'upstream-timeout-ms': '600000' });
    client = new GrpcClient(s.handle.urls.grpc!);
    const inFlight = client.check(checkRequest({ 'x-user-reference': 'alice' }, { configKey: KEY }));
    await upstream.waitForCount(1);
    await eventually(s.close(), 'close() within the shutdown budget');
    const r = await inFlight;
    // Cut by the shutdown: a transport error, never an answer, never OK.
    expect(r.res).toBeUndefined();
    expect(r.err).toBeDefined();
  });
});
