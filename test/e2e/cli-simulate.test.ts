import { createHmac } from 'node:crypto';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { check, startReceiver, until, type Receiver } from '../helpers/simulator.js';
import { runCli, startCli } from '../helpers/cli.js';

let receiver: Receiver | undefined;
afterEach(async () => {
  await receiver?.close();
  receiver = undefined;
});

describe('consent-sidecar simulate', () => {
  it('serves decisions and sends signed deliveries with the custom header; stops on SIGTERM', async () => {
    receiver = await startReceiver();
    const { child, line, exited } = await startCli(
      [
        'simulate',
        '--listen', '127.0.0.1:0',
        '--api-key', 'cli-key',
        '--decision-lifetime-ms', '5000',
        '--webhook-endpoint', receiver.url,
        '--webhook-secret', 'whsec_cli',
        '--webhook-header', 'X-Tenant-Auth: t-123',
        '--webhook-types', 'consent_action.created',
      ],
      /simulate_ready/,
    );
    try {
      const { url, service } = JSON.parse(line) as { url: string; service: string };
      // The simulator stands for the consent service: its log lines do not claim to be the sidecar.
      expect(service).toBe('consent-service-simulator');
      const allow = await check(url, 'cli-key', { userReference: 'alice', configKey: 'marketing-email' });
      expect(allow.body.decision).toBe('ALLOW');
      expect(allow.body.validUntil as number).toBeLessThanOrEqual(Date.now() + 5000);
      expect((await check(url, 'sim_test_key', { userReference: 'alice', configKey: 'marketing-email' })).status).toBe(401);
      await fetch(`${url}/_simulator/consents/revoke`, { method: 'POST', body: JSON.stringify({ userReference: 'alice', configKey: 'credit-report' }) });
      await until(() => receiver!.received.length === 1);
      const [got] = receiver.received;
      expect(got!.headers['x-tenant-auth']).toBe('t-123');
      const ts = String(got!.headers['x-service-timestamp']);
      expect(got!.headers['x-service-signature']).toBe(`v1=${createHmac('sha256', 'whsec_cli').update(`${ts}.${got!.raw}`).digest('hex')}`);
      // only the subscribed type: the REDEC event of that revocation was not sent. A delivery starts
      // when its event is emitted, before the revoke is answered, so the simulator's list of
      // deliveries is complete by now: one, of the subscribed type.
      const deliveries = (await (await fetch(`${url}/_simulator/deliveries`)).json()) as { eventType: string }[];
      expect(deliveries.map((d) => d.eventType)).toEqual(['consent_action.created']);
      expect(receiver.received).toHaveLength(1);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
  });

  it('prints the default fixture, which loads back through --fixtures', async () => {
    const printed = await runCli(['simulate', '--print-fixture']);
    expect(printed.code).toBe(0);
    const dir = await mkdtemp(join(tmpdir(), 'sim-cli-'));
    const file = join(dir, 'fixture.json');
    const fixture = JSON.parse(printed.stdout) as { customers: { userReference: string; customerId: string }[] };
    fixture.customers.push({ userReference: 'zoe', customerId: 'cus_zoe' });
    await writeFile(file, JSON.stringify(fixture));
    const { child, line, exited } = await startCli(['simulate', '--listen', '127.0.0.1:0', '--fixtures', file], /simulate_ready/);
    try {
      const { url } = JSON.parse(line) as { url: string };
      expect((await check(url, 'sim_test_key', { userReference: 'zoe', configKey: 'marketing-email' })).body).toStrictEqual({
        decision: 'DENY',
        configKey: 'marketing-email',
      });
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
  });

  it.each([
    [['--listen', 'nowhere'], '--listen'],
    [['--time-scale', '0'], '--time-scale'],
    [['--decision-lifetime-ms', 'soon'], '--decision-lifetime-ms'],
    [['--latency-ms', '-1'], '--latency-ms'],
    [['--log-level', 'loud'], '--log-level'],
    [['--webhook-endpoint', 'http://127.0.0.1:1/'], '--webhook-secret'],
    [['--webhook-secret', 'whsec_x'], '--webhook-secret: needs --webhook-endpoint'],
    [['--webhook-endpoint', 'http://127.0.0.1:1/', '--webhook-secret', 'nope'], '--webhook-endpoint'],
    [['--webhook-endpoint', 'http://127.0.0.1:1/', '--webhook-secret', 'whsec_x', '--webhook-types', 'a.b'], '--webhook-types'],
    [['--fixtures', '/nonexistent/fixture.json'], '--fixtures'],
    [['--bogus'], '--bogus'],
  ])('rejects %j naming %s, exit 2, no stack trace', async (args, flag) => {
    const { code, stderr } = await runCli(['simulate', '--listen', '127.0.0.1:0', ...args]);
    expect(code).toBe(2);
    expect(stderr).toContain(flag);
    expect(stderr).not.toMatch(/\n\s+at /);
  });
});
