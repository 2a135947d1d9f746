import { SidecarError } from '../lib/errors.js';

/** Stable codes of the simulator's errors; tests assert these, never the message. */
export type SimulatorErrorCode =
  | 'ERR_SIMULATOR_FIXTURE_INVALID'
  | 'ERR_SIMULATOR_OPTIONS_INVALID'
  | 'ERR_SIMULATOR_INVALID_INPUT'
  | 'ERR_SIMULATOR_NOT_FOUND'
  | 'ERR_SIMULATOR_CONFLICT';

/**
 * An error raised by the simulator. `problems` lists every problem found, each starting with the
 * path of the bad field (`$.flows[0].versions[1].consents`), so a fixture is fixed in one pass.
 */
export class SimulatorError extends SidecarError<SimulatorErrorCode> {
  readonly problems: readonly string[];

  constructor(code: SimulatorErrorCode, problems: string | readonly string[], label?: string) {
    const list = typeof problems === 'string' ? [problems] : [...problems];
    const message = label ? `${label}:\n  - ${list.join('\n  - ')}` : list.join('; ');
    super(code, message);
    this.problems = Object.freeze(list);
  }
}
