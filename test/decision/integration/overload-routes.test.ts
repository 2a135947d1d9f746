import { afterEach, describe, expect, it } from 'vitest';
import { checkRequest, GrpcClient, headersOf } from '../../helpers/grpc.js';
import { useSidecar } from '../../helpers/sidecar.js';
import { allow, type ReceivedRequest } from '../../helpers/upstream.js';
import { eventually } from '../../helpers/wait.js';

// Every decision route shares the decision service, so each answers a check that cannot be sent in
// time with cause `overload`, at once (the deadline here is a minute: an answer that waited for it
// would never come within the test's patience), and none of them touches the breaker (one failure
// would open it here). One connection to the service, held; six checks waiting for it fill the queue
// (no answer timed yet: the service is reckoned at an eighth of the deadline, so 1 × (8 − 2) may wait).

const KEY = 'overload-flow';
const WAITING = 6;

let grpc: GrpcClient | undefined;
afterEach(() => {
  grpc?.close();
  grpc = undefined;
});

describe('overload on every decision route', () => {
  const fx = useSidecar();

  it('check, batch items, forward-auth and gRPC ext_authz answer overload at once; the breaker stays closed; the held checks are answered by the service', async () => {
    let release = (): void => undefined;
    const held = new Promise<void>((r) => (release = r));
    const { u, s } = await fx.start((r: ReceivedRequest) => ({ hold: held, body: allow((JSON.parse(r.body) as { configKey: string }).configKey, Date.now() + 600_000) }), {
      'upstream-connections': '1',
      'upstream-timeout-ms': '60000',
      'breaker-failure-threshold': '1',
      'grpc-listen': '127.0.0.1:0',
    });
    const admitted = Array.from({ length: 1 + WAITING }, (_, i) => s.check({ userReference: `admitted-${i}`, configKey: KEY }));
    await u.waitForCount(1);

    const check = await eventually(s.check({ userReference: 'refused-check', configKey: KEY }), 'the check answered before its deadline');
    expect([check.status, check.source, check.json]).toEqual([503, 'fail-closed', { decision: 'DENY', error: 'overload' }]);

    const batch = await eventually(
      s.send('POST', '/sidecar/authorization/check-batch', {
        body: JSON.stringify({ checks: [{ userReference: 'refused-batch-0', configKey: KEY }, { userReference: 'refused-batch-1', configKey: KEY }] }),
      }),
      'the batch answered before its deadline',
    );
    expect(batch.status).toBe(200);
    expect((batch.json!.results as Record<string, unknown>[]).map((r) => [r.decision, r.error, r.source])).toEqual([
      ['DENY', 'overload', 'fail-closed'],
      ['DENY', 'overload', 'fail-closed'],
    ]);

    const forward = await eventually(s.send('GET', `/sidecar/forward-auth?configKey=${KEY}`, { headers: { 'x-user-reference': 'refused-forward' } }), 'forward-auth answered before its deadline');
    expect([forward.status, forward.headers['x-consent-decision-error'], forward.source]).toEqual([503, 'overload', 'fail-closed']);

    grpc = new GrpcClient(s.handle.urls.grpc!);
    const { res, err } = await eventually(grpc.check(checkRequest({ 'x-user-reference': 'refused-grpc' }, { configKey: KEY })), 'gRPC answered before its deadline');
    expect(err).toBeUndefined();
    expect([res!.status?.code, res!.denied_response?.status?.code]).toEqual([14, 'ServiceUnavailable']);
    expect(headersOf(res!)).toMatchObject({ 'x-consent-decision-error': 'overload', 'x-consent-decision-source': 'fail-closed' });

    // Five refusals, counted by cause; the service saw only the one it holds; the breaker never moved.
    expect(await s.metric('consent_sidecar_fail_closed_total', { cause: 'overload' })).toBe(5);
    expect(u.checks).toBe(1);
    expect(await s.metric('consent_sidecar_circuit_breaker_state', { state: 'closed' })).toBe(1);

    release();
    const answers = await Promise.all(admitted);
    expect(answers.map((a) => [a.status, a.source, a.json?.decision])).toEqual(Array(1 + WAITING).fill([200, 'upstream', 'ALLOW']));
    expect(u.checks).toBe(1 + WAITING);
    expect(await s.metric('consent_sidecar_circuit_breaker_state', { state: 'closed' })).toBe(1);
  });
});
