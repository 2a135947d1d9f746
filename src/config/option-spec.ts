/**
 * How a flag is described. Every flag `--some-flag` also reads `CONSENT_SIDECAR_SOME_FLAG`; a flag
 * wins over its variable. The CLI builds its options from these tables, so help text, environment
 * variables and validation cannot drift apart.
 */
export interface OptionSpec {
  /** Long flag name without dashes, e.g. `upstream-url`. */
  readonly name: string;
  /** Commander argument placeholder, e.g. `<url>`. */
  readonly arg: string;
  readonly description: string;
  /** Default as shown in help; the typed default lives in the named constant. */
  readonly defaultText?: string;
  /** Repeat the flag to give several values (the variable takes them comma- or newline-separated). */
  readonly repeatable?: boolean;
  /**
   * A secret given as a value, which has a `-file` form: its help says the value shows in `ps`
   * and recommends the file.
   */
  readonly secret?: boolean;
}

/**
 * What the help of a secret's value flag adds (see {@link OptionSpec.secret}): a flag's value is in
 * the process's command line, which anyone on the machine who can list processes can read.
 */
export function secretFlagWarning(name: string): string {
  return `; a value given here is visible in ps (the process's command line): prefer --${name}-file`;
}

/** Prefix of every variable the sidecar reads. */
export const ENV_PREFIX = 'CONSENT_SIDECAR_';

/** `upstream-url` → `CONSENT_SIDECAR_UPSTREAM_URL`. */
export function envName(flagName: string): string {
  return `${ENV_PREFIX}${flagName.toUpperCase().replace(/-/g, '_')}`;
}
