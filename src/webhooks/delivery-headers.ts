/** The headers a delivery is judged on (besides the required one, when configured). */
const JUDGED = new Set(['x-service-timestamp', 'x-service-signature', 'x-service-delivery-id', 'traceparent', 'tracestate']);

/**
 * The headers the ingress judges a delivery on, each as the list of its values, so one given twice
 * is seen as such (node would join it into one value). Picked from the raw list in one pass: node's
 * `headersDistinct` would build an array for every header the sender sent.
 */
export function deliveryHeaders(raw: readonly string[], required: string | undefined): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (!JUDGED.has(name) && name !== required) continue;
    const values = out[name];
    if (values === undefined) out[name] = [raw[i + 1]!];
    else values.push(raw[i + 1]!);
  }
  return out;
}
