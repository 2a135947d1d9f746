import { SimulatorError } from './errors.js';

/**
 * Faults injected on `POST /v1/authorization/check`. Combine freely: `latencyMs` first, then the
 * first of `reset` (connection destroyed), `status` (that status with a JSON error body),
 * `malformed` (200 with a truncated JSON body); `trickleMs` sends whatever body results one byte
 * every `trickleMs` ms. `count` limits the fault to the next N checks; absent: until cleared.
 *
 * @example { "status": 503, "count": 3 }  // the next three checks answer 503
 */
export interface FaultSpec {
  readonly latencyMs?: number;
  readonly status?: number;
  readonly reset?: boolean;
  readonly malformed?: boolean;
  readonly trickleMs?: number;
  readonly count?: number;
}

const KEYS = ['latencyMs', 'status', 'reset', 'malformed', 'trickleMs', 'count'];

/** Validates a fault; throws `ERR_SIMULATOR_INVALID_INPUT` listing every problem. */
export function validateFault(value: unknown): FaultSpec {
  const problems: string[] = [];
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new SimulatorError('ERR_SIMULATOR_INVALID_INPUT', 'fault: expected an object');
  }
  const o = value as Record<string, unknown>;
  for (const k of Object.keys(o)) if (!KEYS.includes(k)) problems.push(`${k}: unknown field (allowed: ${KEYS.join(', ')})`);
  const int = (k: string, min: number, max: number): void => {
    const v = o[k];
    if (v !== undefined && !(typeof v === 'number' && Number.isSafeInteger(v) && v >= min && v <= max)) {
      problems.push(`${k}: expected an integer ${min}..${max}`);
    }
  };
  int('latencyMs', 0, 600_000);
  int('status', 100, 599);
  int('trickleMs', 1, 60_000);
  int('count', 1, 1_000_000);
  for (const k of ['reset', 'malformed']) if (o[k] !== undefined && typeof o[k] !== 'boolean') problems.push(`${k}: expected true or false`);
  if (problems.length > 0) throw new SimulatorError('ERR_SIMULATOR_INVALID_INPUT', problems, 'invalid fault');
  return o as FaultSpec;
}

/** Holds the active fault and counts it down. */
export class FaultInjector {
  private fault: FaultSpec | undefined;
  private remaining = Number.POSITIVE_INFINITY;

  set(fault: FaultSpec): void {
    this.fault = fault;
    this.remaining = fault.count ?? Number.POSITIVE_INFINITY;
  }

  clear(): void {
    this.fault = undefined;
  }

  /** The fault for the next check, if any (consumes one of `count`). */
  take(): FaultSpec | undefined {
    const fault = this.fault;
    if (!fault) return undefined;
    this.remaining -= 1;
    if (this.remaining <= 0) this.fault = undefined;
    return fault;
  }

  current(): FaultSpec | undefined {
    return this.fault;
  }
}
