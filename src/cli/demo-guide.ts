import { basename, isAbsolute, relative } from 'node:path';
import type { SimulatorHandle } from '../simulator/index.js';

/**
 * How to run this CLI again from the same place: `node dist/cli.js` after `npm ci && npm run build`
 * (the bin is not on PATH then), `consent-sidecar` when installed as a package.
 */
export function cliCommand(argv1: string | undefined = process.argv[1], cwd = process.cwd()): string {
  if (argv1 && basename(argv1) === 'consent-sidecar') return 'consent-sidecar';
  if (argv1 && basename(argv1) === 'cli.js') {
    const rel = relative(cwd, argv1);
    return `node ${rel.startsWith('..') || isAbsolute(rel) ? argv1 : rel}`;
  }
  // From source (tsx) or embedded: the built form, which is what runs after npm ci && npm run build.
  return 'node dist/cli.js';
}

/**
 * How long the REDEC story takes, in words: the service's 8 attempts (about an hour of service time,
 * compressed by `timeScale`), then the grace after the reconciler first saw the obligation, then up
 * to one interval before the run that hands it.
 */
export function redecWait(reconcile: { intervalMs: number; graceMs: number }, timeScale: number): string {
  const retriesS = Math.round(SERVICE_RETRY_SCHEDULE_MS / timeScale / 1000);
  const totalS = Math.ceil((Math.max(SERVICE_RETRY_SCHEDULE_MS / timeScale, reconcile.graceMs) + reconcile.intervalMs) / 1000);
  const about = totalS >= 45 && totalS <= 100 ? 'about a minute' : `about ${totalS} s`;
  return `${about}: the service retries for ${retriesS} s at this --time-scale, and the obligation is handed at the first run once the app is up and ${reconcile.graceMs / 1000} s have passed`;
}

/** A forged forward, as anyone who can reach the app's URL could post it: the mark anyone can write, no signature. */
export function forgery(appUrl: string): string {
  const body = '{"id":"evt_forged","sequence":1,"type":"consent_action.created","occurredAt":0,"data":{"userReference":"alice","action":"grant"}}';
  return `curl -s -i -X POST ${appUrl} -H 'content-type: application/json' -H 'x-consent-sidecar-verified: v1' -d '${body}'`;
}

/** The service's whole retry schedule (1+2+4+8+15+15+15 minutes) before a delivery is terminal. */
const SERVICE_RETRY_SCHEDULE_MS = 60 * 60_000;

/** What the demo prints: the URLs and the lines to try, in the form that runs where you are. */
export function guideFor(
  decision: string,
  sim: SimulatorHandle,
  webhook: string | null,
  admin: string,
  appUrl: string,
  secret: string,
  webhookUrl: string | null,
  reconcile: { intervalMs: number; graceMs: number },
  timeScale = 60,
): string {
  const cli = cliCommand();
  const check = (user: string, key: string): string =>
    `curl -s -i -X POST ${decision}/v1/authorization/check -H 'content-type: application/json' -d '{"userReference":"${user}","configKey":"${key}"}'`;
  const control = (path: string, body: string): string =>
    `curl -s -X POST ${sim.url}/_simulator/${path} -H 'content-type: application/json' -d '${body}'`;
  const lines = [
    'consent-sidecar demo is running (Ctrl-C stops it):',
    `  decision API   ${decision}   (your app calls this, no key needed)`,
    webhook
      ? `  webhook in     ${webhook}/webhooks   (the simulator sends signed events here)`
      : '  webhook in     (not available in this build: revocations will not arrive as webhooks)',
    `  admin          ${admin}/metrics  ${admin}/readyz`,
    `  simulator      ${sim.url}   (the consent service; API key ${sim.apiKey})`,
    `  webhook secret ${secret}   (the simulator signs with it; the sidecar verifies with it)`,
    `  demo app       ${appUrl}   (checks the sidecar's signature on every event, prints each below)`,
    '',
    'ALLOW (run it twice: the second answer says x-consent-decision-source: cache):',
    `  ${check('alice', 'marketing-email')}`,
    'Evaluated denial (bob revoked his consent; the answer names the configKey):',
    `  ${check('bob', 'marketing-email')}`,
    'Pre-evaluation denials (a configuration or reference problem; the answer has a reason):',
    `  customer_not_found:          ${check('nobody', 'marketing-email')}`,
    `  config_not_published:        ${check('alice', 'loyalty-program')}`,
    `  ambiguous_config:            ${check('alice', 'onboarding-bundle')}`,
    `  config_material_unavailable: ${check('alice', 'partner-sharing')}`,
    '',
    'Revoke alice\'s consent at the service: the revocation arrives below as a verified webhook,',
    'purges her cached ALLOW, and the next check is DENY:',
    `  ${control('consents/revoke', '{"userReference":"alice","configKey":"marketing-email"}')}`,
    `  ${check('alice', 'marketing-email')}`,
    'Grant it again (for an hour) and ask (ALLOW, now cached); purge the cache by hand (it says {"purged":1})',
    'and the next answer comes from the service again (x-consent-decision-source: upstream):',
    `  ${control('consents/grant', '{"userReference":"alice","configKey":"marketing-email","ttlMs":3600000}')}`,
    `  ${check('alice', 'marketing-email')}`,
    `  curl -s -X DELETE '${decision}/sidecar/cache?userReference=alice'`,
    `  ${check('alice', 'marketing-email')}`,
    'Make the service fail for the next 3 checks; the check skips the cache (Cache-Control: no-cache), so the',
    'sidecar has to ask the failing service and answers 503 DENY (fail-closed); a cached ALLOW would still be served:',
    `  curl -s -X PUT ${sim.url}/_simulator/faults -H 'content-type: application/json' -d '{"status":503,"count":3}'`,
    `  ${check('alice', 'marketing-email').replace(' -X POST ', " -X POST -H 'cache-control: no-cache' ")}`,
    'REDEC obligations the tenant still has to notify (after a credit-report grant or revoke):',
    `  ${control('consents/revoke', '{"userReference":"alice","configKey":"credit-report"}')}`,
    `  ${cli} redec pending --upstream-url ${sim.url} --api-key ${sim.apiKey} --output table`,
    `A lost REDEC notification, recovered by the reconciler (it lists pending obligations every ${reconcile.intervalMs / 1000} s and`,
    `hands the app any still pending ${reconcile.graceMs / 1000} s after it first saw it): take the demo app down, grant a`,
    'REDEC consent (its redec.notification.required deliveries get 503 until the service gives up: watch',
    `them turn terminal in ${sim.url}/_simulator/deliveries), bring the app up, and wait for a RECONCILED line`,
    `(${redecWait(reconcile, timeScale)}):`,
    `  curl -s -X POST ${new URL(appUrl).origin}/_demo/down`,
    `  ${control('consents/grant', '{"userReference":"carol","configKey":"credit-report","ttlMs":3600000}')}`,
    `  curl -s -X POST ${new URL(appUrl).origin}/_demo/up`,
    'Then register the evidence through the sidecar as the RECONCILED line says: the obligation leaves',
    `the listing and is not handed again (${admin}/metrics: consent_sidecar_redec_pending_obligations).`,
    'The same check from the command line (exit 0 ALLOW, 1 DENY, 2 no decision):',
    `  ${cli} check --via ${decision} --user-reference alice --config-key marketing-email`,
    'Make the simulator send a signed event of any type, then replay it (the sidecar answers the',
    'replay as a duplicate and does not forward it again):',
    `  ${cli} webhook trigger consent_action.created --simulator ${sim.url} --data '{"userReference":"carol","configKey":"marketing-email","action":"revoke"}'`,
    `  ${cli} webhook resend <id printed above> --simulator ${sim.url}`,
    ...(webhookUrl
      ? [
          'Sign a delivery yourself with the secret above and send it to the sidecar (sign prints the',
          'headers, then the curl line, which the last command runs):',
          `  f=$(mktemp) && echo '{"id":"evt_by_hand","sequence":1,"type":"consent_action.created","occurredAt":${Date.now()},"data":{}}' > "$f"`,
          `  ${cli} webhook sign --secret ${secret} --body-file "$f" --curl ${webhookUrl} | tail -n 1 | sh`,
        ]
      : []),
    'Post a "verified" event straight to the demo app, as anything that reaches its URL could: it carries no',
    "signature of its sidecar's, so the app refuses it (401; see docs/webhooks.md, Signed forwards):",
    `  ${forgery(appUrl)}`,
    `Webhook deliveries and their attempts: curl -s ${sim.url}/_simulator/deliveries`,
  ];
  return lines.join('\n');
}
