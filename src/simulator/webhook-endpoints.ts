import { SimulatorError } from './errors.js';
import { isEventType, type EventType } from './event-types.js';

/** A registered endpoint (what the portal would hold). */
export interface WebhookEndpoint {
  readonly id: string;
  readonly url: string;
  readonly secret: string;
  /** Subscribed types; every type when absent. */
  readonly types?: readonly EventType[];
  readonly header?: { readonly name: string; readonly value: string };
}

/** What registering takes: `header` as `{name, value}` or `"Name: value"`. */
export interface WebhookEndpointInput {
  readonly url: string;
  readonly secret: string;
  readonly types?: readonly string[];
  readonly header?: { readonly name: string; readonly value: string } | string;
}

// The document: x-service-* and transport headers cannot be replaced by the custom header.
const FORBIDDEN_HEADERS = new Set([
  'host',
  'content-type',
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'te',
  'trailer',
  'upgrade',
  'user-agent',
  'expect',
]);
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** Validates an endpoint; throws `ERR_SIMULATOR_INVALID_INPUT` listing every problem. */
export function validateEndpoint(id: string, input: WebhookEndpointInput): WebhookEndpoint {
  const problems: string[] = [];
  const raw = input as unknown as Record<string, unknown>;
  let url: URL | undefined;
  try {
    url = new URL(String(raw.url));
    if (url.protocol !== 'http:' && url.protocol !== 'https:') problems.push('url: expected http(s)');
  } catch {
    problems.push(`url: not a URL: ${JSON.stringify(raw.url)}`);
  }
  if (typeof raw.secret !== 'string' || !/^whsec_\S+$/.test(raw.secret)) {
    problems.push('secret: expected "whsec_" followed by the secret');
  }
  let types: EventType[] | undefined;
  if (raw.types !== undefined) {
    if (!Array.isArray(raw.types) || raw.types.length === 0) problems.push('types: expected a non-empty array');
    else {
      raw.types.forEach((t, i) => {
        if (!isEventType(t)) problems.push(`types[${i}]: unknown event type ${JSON.stringify(t)}`);
      });
      types = raw.types.filter(isEventType);
    }
  }
  let header: { name: string; value: string } | undefined;
  if (raw.header !== undefined) {
    const h = raw.header;
    if (typeof h === 'string') {
      const at = h.indexOf(':');
      header = at > 0 ? { name: h.slice(0, at).trim(), value: h.slice(at + 1).trim() } : { name: '', value: '' };
    } else if (typeof h === 'object' && h !== null) {
      const o = h as Record<string, unknown>;
      header = { name: String(o.name ?? ''), value: String(o.value ?? '') };
    }
    const name = header?.name.toLowerCase() ?? '';
    // The document: name and value are both filled or both empty.
    if (!header || !TOKEN.test(header.name) || header.value === '') {
      problems.push('header: expected "Name: value" with both filled');
    } else if (name.startsWith('x-service-') || FORBIDDEN_HEADERS.has(name)) {
      problems.push(`header: "${header.name}" cannot be replaced (x-service-* and transport headers are reserved)`);
    } else if (/[\r\n]/.test(header.value)) {
      problems.push('header: value must be one line');
    }
  }
  if (problems.length > 0) throw new SimulatorError('ERR_SIMULATOR_INVALID_INPUT', problems, 'invalid webhook endpoint');
  return {
    id,
    url: (url as URL).toString(),
    secret: raw.secret as string,
    ...(types ? { types } : {}),
    ...(header ? { header } : {}),
  };
}
