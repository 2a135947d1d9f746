import { hmacStart, secretKeys, SIGNATURE_SCHEME_PREFIX } from './signature.js';

/** When the sidecar signed a forward (epoch seconds, decimal digits). */
export const FORWARD_TIMESTAMP_HEADER = 'x-consent-sidecar-timestamp';
/** `v1=<lowercase hex HMAC-SHA256 of "<timestamp>.<exact raw body>">` under the pod's app signing secret. */
export const FORWARD_SIGNATURE_HEADER = 'x-consent-sidecar-signature';

/**
 * Signs what the sidecar hands the app (docs/webhooks.md, Signed forwards): the service's own
 * construction, keyed by the pod's secret (`--app-signing-secret[-file]`), which the service never
 * sees. The first secret signs; the app accepts any of the list, so a rotation adds the new secret
 * first and removes the old one once every app reads the new file. Each forward is signed when it is
 * sent (a queued event retried an hour later carries that hour's timestamp), so the app's tolerance
 * bounds how long a captured forward could be replayed to it.
 *
 * @example
 * const signer = new ForwardSigner(() => ['a-secret-of-at-least-32-characters…'], Date.now);
 * signer.sign(Buffer.from('{"id":"evt_1"}'), { 'content-type': 'application/json' });
 * // { 'content-type': …, 'x-consent-sidecar-timestamp': '1767225600', 'x-consent-sidecar-signature': 'v1=…' }
 */
export class ForwardSigner {
  /**
   * @param secrets the current secrets (a file secret's `current()`: a rotation takes effect at the next forward)
   * @param now epoch ms
   */
  constructor(
    private readonly secrets: () => readonly string[],
    private readonly now: () => number,
  ) {}

  /** `headers` and the two signature headers over `rawBody` exactly as it is sent; `headers` is not changed. */
  sign(rawBody: Buffer | string, headers: Readonly<Record<string, string>>): Record<string, string> {
    const timestamp = String(Math.floor(this.now() / 1000));
    // The key objects are made once per secret list (signature.ts): a rotation brings a new list.
    const key = secretKeys(this.secrets())[0];
    if (key === undefined) throw new RangeError('no app signing secret');
    const hex = hmacStart(key, timestamp).update(rawBody).digest('hex');
    return { ...headers, [FORWARD_TIMESTAMP_HEADER]: timestamp, [FORWARD_SIGNATURE_HEADER]: `${SIGNATURE_SCHEME_PREFIX}${hex}` };
  }
}
