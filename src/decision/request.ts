import type { CheckRequest } from './types.js';

/** Why a request was refused before the service was asked. `field` names what is wrong. */
export interface InvalidRequest {
  readonly field: 'body' | 'userReference' | 'configKey' | 'path' | 'method' | 'request' | 'host';
  readonly detail: string;
  /** A stable code of what is wrong, where the field alone does not say (a refused path). */
  readonly problem?: string;
}

/** Longest accepted `userReference` / `configKey`, in UTF-16 units. */
export const MAX_FIELD_LENGTH = 1024;

/**
 * Validates the app's request body. Only the two documented fields are kept and forwarded, so
 * the cache key (both fields) is the whole request.
 */
export function parseCheckRequest(body: string): CheckRequest | InvalidRequest {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return { field: 'body', detail: 'body is not valid JSON' };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { field: 'body', detail: 'body must be a JSON object' };
  }
  const { userReference, configKey } = value as Record<string, unknown>;
  const bad = checkField('userReference', userReference) ?? checkField('configKey', configKey);
  if (bad) return bad;
  return { userReference: userReference as string, configKey: configKey as string };
}

function checkField(field: 'userReference' | 'configKey', value: unknown): InvalidRequest | undefined {
  if (typeof value !== 'string') {
    return { field, detail: `${field} must be a string${value === undefined ? ' and is missing' : ''}` };
  }
  if (value.length === 0) return { field, detail: `${field} must not be empty` };
  if (value.length > MAX_FIELD_LENGTH) return { field, detail: `${field} is longer than ${MAX_FIELD_LENGTH} characters` };
  return undefined;
}

export function isInvalidRequest(r: CheckRequest | InvalidRequest): r is InvalidRequest {
  return 'field' in r;
}
