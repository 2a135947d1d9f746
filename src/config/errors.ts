import { SidecarError } from '../lib/errors.js';

export type ConfigErrorCode = 'ERR_CONFIG_INVALID';

/**
 * Every configuration problem found in one pass. `problems` are complete sentences that start with
 * the flag they concern (`--upstream-url: …`), so an operator fixes them all in one go.
 */
export class ConfigError extends SidecarError<ConfigErrorCode> {
  readonly problems: readonly string[];

  constructor(problems: readonly string[]) {
    super('ERR_CONFIG_INVALID', `invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.problems = Object.freeze([...problems]);
  }
}
