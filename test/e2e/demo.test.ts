import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DEMO_RECONCILE_GRACE_MS, DEMO_RECONCILE_INTERVAL_MS, startDemo, type DemoHandle } from '../../src/cli/demo.js';
import { redecWait } from '../../src/cli/demo-guide.js';
import { silentLogger } from '../../src/observability/index.js';
import { deliveryHeaders, metricValue } from '../helpers/webhooks.js';
import { runCli } from '../helpers/cli.js';

const ANY = { host: '127.0.0.1', port: 0 };
/** Every listener on a free loopback port, nothing logged: what each test's demo shares. */
const QUIET_ON_FREE_PORTS = {
  listen: ANY,
  webhookListen: ANY,
  adminListen: ANY,
  simulatorListen: ANY,
  appListen: ANY,
  logLevel: 'silent',
  logger: silentLogger(),
} as const;
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
    demo = await startDemo({ ...QUIET_ON_FREE_PORTS, timeScale: 60, print: (l) => printed.push(l) });
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
    expect(printed.some((l) => l.startsWith('[demo app] verified event') && l.includes('consent_action.created revoke') && l.includes("its sidecar's signature checked"))).toBe(true);
    // Every forward carried the sidecar's signature under the demo's app signing secret.
    expect(demo.received.every((e) => /^v1=[0-9a-f]{64}$/.test(String(e.headers['x-consent-sidecar-signature'])))).toBe(true);

    // the guide's forgery line: posted straight to the app, with the mark anyone can write, refused
    const forged = guide.split('\n').find((l) => l.includes('evt_forged'))!;
    const forgedBody = /-d '([^']+)'/.exec(forged)![1]!;
    const refused = await fetch(/-X POST (\S+)/.exec(forged)![1]!, { method: 'POST', headers: { 'content-type': 'application/json', 'x-consent-sidecar-verified': 'v1' }, body: forgedBody });
    expect(refused.status).toBe(401);
    expect(await refused.json()).toEqual({ error: 'timestamp_missing' });
    expect(demo.received.map((e) => e.id)).not.toContain('evt_forged');
    expect(printed.some((l) => l.startsWith("[demo app] refused a request that is not its sidecar's forward"))).toBe(true);
    const after = await runGuideCheck(guide, body('alice', 'marketing-email'));
    expect(after).toMatchObject({ source: 'upstream', json: { decision: 'DENY', configKey: 'marketing-email' } });

    // the manual purge line points at the real route
    const purge = /curl -s -X DELETE '([^']+)'/.exec(guide)![1]!;
    expect((await fetch(purge, { method: 'DELETE' })).status).toBe(200);

    // Grant again, ask (cached), purge by hand: it purges that entry, and the next answer is the service's.
    const grant = guide.split('\n').find((l) => l.includes('/_simulator/consents/grant') && l.includes('marketing-email'))!;
    expect((await fetch(/(http:\/\/\S+\/_simulator\/consents\/grant)/.exec(grant)![1]!, { method: 'POST', body: /-d '([^']+)'/.exec(grant)![1]! })).status).toBe(200);
    const steps = guide.slice(guide.indexOf(grant));
    expect(steps.indexOf('/v1/authorization/check')).toBeLessThan(steps.indexOf('-X DELETE'));
    expect((await runGuideCheck(guide, body('alice', 'marketing-email'))).json).toMatchObject({ decision: 'ALLOW' });
    expect(await (await fetch(purge, { method: 'DELETE' })).json()).toEqual({ purged: 1 });
    expect((await runGuideCheck(guide, body('alice', 'marketing-email'))).source).toBe('upstream');
    expect(guide).toContain('(it says {"purged":1})');

    // The fault step's check skips the cache: alice's ALLOW is cached, yet the answer is 503 fail-closed.
    const fault = guide.split('\n').find((l) => l.includes('/_simulator/faults'))!;
    const faultUrl = /(http:\/\/\S+\/_simulator\/faults)/.exec(fault)![1]!;
    expect((await fetch(faultUrl, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: /-d '([^']+)'/.exec(fault)![1]! })).status).toBe(200);
    const noCache = guide.split('\n').find((l) => l.includes("-H 'cache-control: no-cache'"))!;
    expect(noCache).toContain('/v1/authorization/check');
    const failed = await fetch(/(http:\/\/\S+\/v1\/authorization\/check)/.exec(noCache)![1]!, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'cache-control': 'no-cache' },
      body: /-d '([^']+)'/.exec(noCache)![1]!,
    });
    expect(failed.status).toBe(503);
    expect(await failed.json()).toMatchObject({ decision: 'DENY' });
    expect(failed.headers.get('x-consent-decision-source')).toBe('fail-closed');
  });

  it('prints the webhook secret it uses, CLI lines that run after npm ci, and trigger/resend work against it', async () => {
    demo = await startDemo({ ...QUIET_ON_FREE_PORTS, timeScale: 60, print: () => undefined });
    const { guide } = demo;
    // The printed secret is the one the sidecar verifies with: a delivery signed with it here
    // (node:crypto, independently of our code) is accepted and reaches the demo app.
    const secret = /webhook secret (whsec_\S+)/.exec(guide)![1]!;
    const webhookUrl = `${demo.sidecar.urls.webhook}/webhooks`;
    const body = JSON.stringify({ id: 'evt_by_hand', sequence: 1, type: 'consent_action.created', occurredAt: Date.now(), data: {} });
    const ts = Math.floor(Date.now() / 1000);
    expect((await fetch(webhookUrl, { method: 'POST', headers: deliveryHeaders(secret, ts, body, 'evt_by_hand'), body })).status).toBe(200);
    expect(demo.received.map((e) => e.id)).toContain('evt_by_hand');
    // The guide's sign line, run as printed (the body file it writes first), its headers sent with the file.
    // The file is a mktemp one, never event.json in the directory the demo is run from (it used to be).
    const dir = mkdtempSync(join(tmpdir(), 'cs-demo-'));
    const bodyLine = guide.split('\n').find((l) => l.includes('> "$f"'))!;
    expect(bodyLine.trim().startsWith('f=$(mktemp) && echo ')).toBe(true);
    expect(guide).not.toContain('event.json');
    writeFileSync(join(dir, 'event.json'), `${/echo '([^']+)'/.exec(bodyLine)![1]!}\n`);
    const signLine = guide.split('\n').find((l) => l.includes('webhook sign'))!.trim();
    expect(signLine).toBe(`node dist/cli.js webhook sign --secret ${secret} --body-file "$f" --curl ${webhookUrl} | tail -n 1 | sh`);
    const signed = await runCli(['webhook', 'sign', '--secret', secret, '--body-file', join(dir, 'event.json'), '--curl', webhookUrl]);
    expect(signed.code, signed.stderr).toBe(0);
    const out = signed.stdout.trim().split('\n');
    expect(out.at(-1)).toMatch(/^curl .* --data-binary '@.*event\.json' /);
    const hdrs = Object.fromEntries(out.slice(0, -1).map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()]));
    const fileBody = readFileSync(join(dir, 'event.json'));
    const byHand = await fetch(webhookUrl, { method: 'POST', headers: { ...hdrs, 'x-service-event-id': 'evt_by_hand_2' }, body: fileBody });
    // Already accepted above under the same envelope id: a duplicate, answered 200 (the signature held).
    expect(byHand.status).toBe(200);

    // Every CLI line is the form that runs after `npm ci && npm run build`.
    const cliLines = guide.split('\n').filter((l) => /\b(redec pending|check --via|webhook (trigger|resend|sign))\b/.test(l));
    expect(cliLines.length).toBeGreaterThanOrEqual(5);
    for (const l of cliLines) expect(l.trim(), l).toMatch(/^(echo .* \| )?node dist\/cli\.js /);
    expect(guide).not.toMatch(/^\s+consent-sidecar /m);

    // webhook trigger: a signed event of the given type reaches the app through the sidecar, and the
    // command says what the sidecar answered.
    const sim = demo.simulator.url;
    const trigger = await runCli(['webhook', 'trigger', 'consent_action.created', '--simulator', sim, '--data', '{"userReference":"carol","action":"revoke"}']);
    expect(trigger.code, trigger.stderr).toBe(0);
    const emitted = JSON.parse(trigger.stdout) as { id: string; type: string };
    expect(emitted.type).toBe('consent_action.created');
    expect(trigger.stderr).toBe(`we_1 ${webhookUrl} answered 200 accepted: the app has it\n`);
    await demo.simulator.deliveriesSettled();
    expect(demo.received.filter((e) => e.id === emitted.id)).toHaveLength(1);

    // webhook resend: the same event again; the sidecar accepts it as a duplicate and does not forward
    // it twice, and the command says so (it used to print "accepted" for a duplicate too).
    const resend = await runCli(['webhook', 'resend', emitted.id, '--simulator', sim]);
    expect(resend.code, resend.stderr).toBe(0);
    expect(resend.stderr).toBe(`we_1 ${webhookUrl} answered 200 duplicate: accepted before: not forwarded again\n`);
    expect(JSON.parse(resend.stdout)).toMatchObject({ id: emitted.id, deliveries: 1 });
    await demo.simulator.deliveriesSettled();
    const timelines = (await (await fetch(`${sim}/_simulator/deliveries`)).json()) as { eventId: string; state: string }[];
    expect(timelines.filter((t) => t.eventId === emitted.id).map((t) => t.state)).toEqual(['accepted', 'accepted']);
    expect(demo.received.filter((e) => e.id === emitted.id)).toHaveLength(1);

    // Errors: an unknown type is a usage error listing the catalog; an unknown id is the simulator's 404.
    const bad = await runCli(['webhook', 'trigger', 'consent.nope', '--simulator', sim]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('redec.notification.required');
    const missing = await runCli(['webhook', 'resend', 'evt_missing', '--simulator', sim]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('404');
  });

  it('tells the REDEC story: deliveries go terminal while the app is down, the reconciler hands the obligation once, the evidence ends it', async () => {
    const printed: string[] = [];
    demo = await startDemo({
      ...QUIET_ON_FREE_PORTS,
      // A service hour of retries lasts a second; the reconciler runs every 200 ms with a 1 s grace.
      timeScale: 3600,
      reconcileIntervalMs: 200,
      reconcileGraceMs: 1000,
      print: (l) => printed.push(l),
    });
    const { guide } = demo;
    const curl = (needle: string): { url: string; body: string | undefined } => {
      const line = guide.split('\n').find((l) => l.includes(needle))!;
      return { url: /curl -s -X POST (\S+)/.exec(line)![1]!, body: /-d '([^']+)'/.exec(line)?.[1] };
    };
    const post = async (c: { url: string; body: string | undefined }): Promise<number> =>
      (await fetch(c.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: c.body ?? '' })).status;

    expect(await post(curl('/_demo/down'))).toBe(200);
    expect(await post(curl('"userReference":"carol","configKey":"credit-report"'))).toBe(200);
    await demo.simulator.deliveriesSettled();
    const timelines = (await (await fetch(`${demo.simulator.url}/_simulator/deliveries`)).json()) as { eventType: string; state: string }[];
    expect(timelines.filter((t) => t.eventType === 'redec.notification.required').map((t) => t.state)).toEqual(['terminal']);
    expect(demo.received.filter((e) => e.type === 'redec.notification.required')).toEqual([]);

    expect(await post(curl('/_demo/up'))).toBe(200);
    await vi.waitFor(() => expect(demo!.received.filter((e) => e.type === 'consent_sidecar.redec.notification_pending')).toHaveLength(1), { timeout: 15_000, interval: 50 });
    const event = demo.received.find((e) => e.type === 'consent_sidecar.redec.notification_pending')!;
    expect(event.id).toMatch(/^reconcile_/);
    expect(event.data).toMatchObject({ customerTenantId: 'carol', deliveryResponsibility: 'tenant', notificationReason: 'grant', status: 'pending' });
    expect(event.headers['x-consent-sidecar-reconciled']).toBe('1');
    expect(event.headers['x-consent-sidecar-verified']).toBeUndefined();
    // The guide says how long the story takes (with the demo's own 5 s interval and 20 s grace: about a minute).
    expect(guide).toMatch(/wait for a RECONCILED line\n\(about \d+ s: the service retries for 1 s at this --time-scale/);
    const line = printed.find((l) => l.startsWith('[demo app] RECONCILED'))!;
    expect(line).toContain('for carol');

    // The evidence, registered as the printed line says (through the sidecar's passthrough).
    const evidence = /curl -s -X POST (\S+notification-evidence)/.exec(line)![1]!;
    expect(evidence.startsWith(demo.sidecar.urls.decision)).toBe(true);
    expect((await fetch(evidence, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).status).toBe(200);
    await vi.waitFor(async () => expect(await metricValue(demo!.sidecar.registry, 'consent_sidecar_redec_pending_obligations')).toBe(0), { timeout: 15_000, interval: 50 });
    expect(demo.received.filter((e) => e.type === 'consent_sidecar.redec.notification_pending')).toHaveLength(1);
  });

  it("the REDEC step says it takes about a minute with the demo's defaults", () => {
    expect(redecWait({ intervalMs: DEMO_RECONCILE_INTERVAL_MS, graceMs: DEMO_RECONCILE_GRACE_MS }, 60)).toMatch(/^about a minute: the service retries for 60 s/);
  });

  it('rejects bad flags naming them, exit 2', async () => {
    const res = await runCli(['demo', '--listen', 'x', '--time-scale', 'fast']);
    expect(res.code).toBe(2);
    expect(res.stderr).toContain('--listen');
    expect(res.stderr).toContain('--time-scale');
  });
});
