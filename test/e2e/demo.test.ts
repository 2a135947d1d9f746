import { afterEach, describe, expect, it } from 'vitest';
import { startDemo, type DemoHandle } from '../../src/cli/demo.js';
import { silentLogger } from '../../src/observability/index.js';
import { runCli } from './cli.js';

const ANY = { host: '127.0.0.1', port: 0 };
let demo: DemoHandle | undefined;
afterEach(async () => {
  await demo?.close();
  demo = undefined;
});

/** Runs one of the guide's `curl … -d '<json>'` check lines with fetch. */
async function runGuideCheck(guide: string, body: string): Promise<{ status: number; json: unknown; source: string | null }> {
  const line = guide.split('\n').find((l) => l.includes('/v1/authorization/check') && l.includes(body));
  if (!line) throw new Error(`no guide line for ${body}`);
  const url = /(http:\/\/\S+\/v1\/authorization\/check)/.exec(line)![1]!;
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  return { status: res.status, json: await res.json(), source: res.headers.get('x-consent-decision-source') };
}

describe('consent-sidecar demo', () => {
  it('wires simulator, sidecar and app, and every check the guide prints answers as it says', async () => {
    const printed: string[] = [];
    demo = await startDemo({
      listen: ANY,
      webhookListen: ANY,
      adminListen: ANY,
      simulatorListen: ANY,
      appListen: ANY,
      timeScale: 60,
      logLevel: 'silent',
      logger: silentLogger(),
      print: (l) => printed.push(l),
    });
    const { guide } = demo;
    const body = (user: string, key: string) => JSON.stringify({ userReference: user, configKey: key });
    const allow = await runGuideCheck(guide, body('alice', 'marketing-email'));
    expect(allow.json).toMatchObject({ decision: 'ALLOW' });
    expect((await runGuideCheck(guide, body('alice', 'marketing-email'))).source).toBe('cache');
    expect((await runGuideCheck(guide, body('bob', 'marketing-email'))).json).toStrictEqual({ decision: 'DENY', configKey: 'marketing-email' });
    for (const [user, key, reason] of [
      ['nobody', 'marketing-email', 'customer_not_found'],
      ['alice', 'loyalty-program', 'config_not_published'],
      ['alice', 'onboarding-bundle', 'ambiguous_config'],
      ['alice', 'partner-sharing', 'config_material_unavailable'],
    ] as const) {
      expect(guide).toContain(`${reason}:`);
      expect((await runGuideCheck(guide, body(user, key))).json).toStrictEqual({ decision: 'DENY', reason });
    }

    // the guide's revoke line, then the revocation arrives as a verified event and the next check is DENY
    const revoke = guide.split('\n').find((l) => l.includes('/_simulator/consents/revoke') && l.includes('marketing-email'))!;
    const revokeUrl = /(http:\/\/\S+\/_simulator\/consents\/revoke)/.exec(revoke)![1]!;
    const revokeBody = /-d '([^']+)'/.exec(revoke)![1]!;
    expect((await fetch(revokeUrl, { method: 'POST', body: revokeBody })).status).toBe(200);
    await demo.simulator.deliveriesSettled();
    expect(demo.received.map((e) => [e.type, e.data.action, e.data.userReference])).toEqual([['consent_action.created', 'revoke', 'alice']]);
    expect(printed.some((l) => l.startsWith('[demo app] verified event') && l.includes('consent_action.created revoke'))).toBe(true);
    const after = await runGuideCheck(guide, body('alice', 'marketing-email'));
    expect(after).toMatchObject({ source: 'upstream', json: { decision: 'DENY', configKey: 'marketing-email' } });

    // the manual purge line points at the real route
    const purge = /curl -s -X DELETE '([^']+)'/.exec(guide)![1]!;
    expect((await fetch(purge, { method: 'DELETE' })).status).toBe(200);
  });

  it('rejects bad flags naming them, exit 2', async () => {
    const res = await runCli(['demo', '--listen', 'x', '--time-scale', 'fast']);
    expect(res.code).toBe(2);
    expect(res.stderr).toContain('--listen');
    expect(res.stderr).toContain('--time-scale');
  });
});
