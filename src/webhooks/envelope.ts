import { MAX_EVENT_ID_BYTES } from './event-id.js';

/** The JSON body of every delivery (interface document, Events → Envelope). */
export interface WebhookEnvelope {
  readonly id: string;
  /** Global monotonic sequence; gaps are normal. */
  readonly sequence: number;
  /** Catalog type; unknown types are still valid (the catalog grows). */
  readonly type: string;
  /** Epoch ms. */
  readonly occurredAt: number;
  readonly data: Readonly<Record<string, unknown>>;
}

export type EnvelopeResult =
  | { readonly ok: true; readonly envelope: WebhookEnvelope }
  | { readonly ok: false; readonly code: 'ERR_WEBHOOK_INVALID_ENVELOPE'; readonly detail: string };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Parses a verified body. Only ever called after {@link verifyDelivery} succeeded: the document says
 * the receiver never processes an event whose signature it did not verify.
 */
export function parseEnvelope(rawBody: Buffer): EnvelopeResult {
  let value: unknown;
  try {
    value = JSON.parse(rawBody.toString('utf8'));
  } catch {
    return { ok: false, code: 'ERR_WEBHOOK_INVALID_ENVELOPE', detail: 'body is not JSON' };
  }
  if (!isObject(value)) return { ok: false, code: 'ERR_WEBHOOK_INVALID_ENVELOPE', detail: 'body is not a JSON object' };
  const { id, sequence, type, occurredAt, data } = value;
  const problem =
    typeof id !== 'string' || id === ''
      ? 'id must be a non-empty string'
      : Buffer.byteLength(id, 'utf8') > MAX_EVENT_ID_BYTES
        ? `id must be at most ${MAX_EVENT_ID_BYTES} bytes`
        : !Number.isSafeInteger(sequence)
        ? 'sequence must be an integer'
        : typeof type !== 'string' || type === ''
          ? 'type must be a non-empty string'
          : !Number.isSafeInteger(occurredAt)
            ? 'occurredAt must be an integer (epoch ms)'
            : !isObject(data)
              ? 'data must be an object'
              : null;
  if (problem) return { ok: false, code: 'ERR_WEBHOOK_INVALID_ENVELOPE', detail: problem };
  return {
    ok: true,
    envelope: { id: id as string, sequence: sequence as number, type: type as string, occurredAt: occurredAt as number, data: data as Record<string, unknown> },
  };
}
