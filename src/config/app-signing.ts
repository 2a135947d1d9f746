import type { OptionSpec } from './option-spec.js';
import type { Reader } from './reader.js';
import { secretLines, type Secret, type SecretParser } from './secret.js';

// Signed forwards (docs/webhooks.md, Signed forwards): the pod's own secret, which the service never
// sees, under which every event handed to the app is signed so that the app can tell the sidecar's
// forwards from anything else that reaches its webhook URL.

/**
 * Shortest app signing secret (characters). An HMAC key anyone could guess signs forgeries: 32
 * random characters are more than 128 bits (the chart makes 48).
 */
export const MIN_APP_SIGNING_SECRET_LENGTH = 32;

export const APP_SIGNING_OPTIONS: readonly OptionSpec[] = [
  {
    name: 'app-signing-secret',
    arg: '<secret>',
    description:
      'sign every event handed to the app (x-consent-sidecar-timestamp, x-consent-sidecar-signature: HMAC-SHA256 under the first secret; repeat for rotation, the app accepts all); without it, forwards are unauthenticated (warned at start)',
    repeatable: true,
    secret: true,
  },
  { name: 'app-signing-secret-file', arg: '<path>', description: 'file with one app signing secret per line (the first signs); re-read when it changes' },
];

/** One secret per line, at least {@link MIN_APP_SIGNING_SECRET_LENGTH} characters, no spaces; blank lines and `#` comments are ignored. */
export const parseAppSigningSecrets: SecretParser<readonly string[]> = (text) => {
  const secrets = secretLines(text);
  if (secrets.length === 0) return { error: 'no app signing secret given' };
  for (const [i, s] of secrets.entries()) {
    // The value is never quoted: the message would put the secret in the log.
    if (s.length < MIN_APP_SIGNING_SECRET_LENGTH) return { error: `secret #${i + 1} is shorter than ${MIN_APP_SIGNING_SECRET_LENGTH} characters` };
    if (/\s/.test(s)) return { error: `secret #${i + 1} holds a space or a tab (one secret per line)` };
  }
  return { value: Object.freeze(secrets) };
};

/**
 * `--app-signing-secret` / `--app-signing-secret-file`, or null when neither is given. Nothing is
 * forwarded without the webhook ingress, so the flag without it is a mistake; a secret the service
 * already holds (one of `webhookSecrets`) would sign nothing the service could not also sign.
 */
export function readAppSigning(r: Reader, webhookSecrets: readonly string[] | null): Secret<readonly string[]> | null {
  const signing = r.secret('app-signing-secret', parseAppSigningSecrets, true);
  if (!signing) return null;
  if (webhookSecrets === null) {
    if (!r.problems.some((p) => p.startsWith('--app-webhook-url') || p.startsWith('--webhook-secret'))) {
      r.problem(signing.origin, 'nothing is forwarded without --app-webhook-url or --app-webhook-route (the webhook ingress is off)');
    }
    return null;
  }
  if (signing.current().some((s) => webhookSecrets.includes(s))) {
    r.problem(signing.origin, 'must differ from every --webhook-secret: the service holds those, and the app must be able to tell the sidecar from the service');
    signing.close();
    return null;
  }
  return signing;
}
