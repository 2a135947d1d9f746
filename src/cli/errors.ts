import { SidecarError } from '../lib/errors.js';

export type CliErrorCode = 'ERR_CLI_USAGE';

/** A command used wrongly; the CLI prints the message (which names the flag) and exits 2. */
export class CliUsageError extends SidecarError<CliErrorCode> {
  constructor(message: string) {
    super('ERR_CLI_USAGE', message);
  }
}

/** Exit codes shared by every command. */
export const EXIT = { ok: 0, deny: 1, usage: 2, failure: 1 } as const;
