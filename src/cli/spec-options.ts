import { InvalidArgumentError, Option, type Command } from 'commander';
import { envName, secretFlagWarning, unknownEnvVariables, type OptionSpec, type RawFlags } from '../config/index.js';

export const camel = (name: string): string => name.replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());

/**
 * Adds the options of a spec table to a command. Defaults and variables are resolved by
 * `src/config` (not by commander) so the flag-over-variable rule and validation live in one place.
 */
export function addSpecOptions(cmd: Command, specs: readonly OptionSpec[], meaning: Readonly<Record<string, string>> = {}): Command {
  for (const spec of specs) {
    const defaults = spec.defaultText === undefined ? '' : ` (default: ${spec.defaultText})`;
    const description = `${meaning[spec.name] ?? spec.description}${spec.secret ? secretFlagWarning(spec.name) : ''}`;
    const option = new Option(`--${spec.name} ${spec.arg}`, `${description}${defaults} [${envName(spec.name)}]`);
    if (spec.repeatable) option.argParser((value: string, previous: string[] | undefined) => [...(previous ?? []), value]);
    cmd.addOption(option);
  }
  return cmd;
}

/**
 * What the upstream flags mean for a one-shot command (`check`, `redec pending`): files are read
 * once, not followed. `serve`'s own texts are the spec's.
 */
export const ONE_SHOT_UPSTREAM_MEANING: Readonly<Record<string, string>> = {
  'api-key-file': 'file holding the API key (read once)',
};

/** The parsed values keyed by flag name, for `loadServeConfig` / `resolveUpstreamConfig`. */
export function rawFlags(cmd: Command, specs: readonly OptionSpec[]): RawFlags {
  const opts = cmd.opts<Record<string, string | string[] | undefined>>();
  const out: Record<string, string | readonly string[] | undefined> = {};
  for (const spec of specs) out[spec.name] = opts[camel(spec.name)];
  return out;
}

/** One line per `CONSENT_SIDECAR_*` variable that no flag reads (with the likely intended name). */
export function unknownVariableWarnings(): string[] {
  return unknownEnvVariables().map(
    (v) => `${v.name} is not a consent-sidecar variable and is ignored${v.suggestion ? ` (did you mean ${v.suggestion}?)` : ''}`,
  );
}

/** Writes {@link unknownVariableWarnings} to stderr, as the one-shot commands report them. */
export function warnUnknownVariables(): void {
  for (const msg of unknownVariableWarnings()) process.stderr.write(`consent-sidecar: warning: ${msg}\n`);
}

/**
 * Makes every option of `program` and its commands that takes one value refuse a second one:
 * commander keeps the last of `--listen a --listen b` silently, so the sidecar would bind where the
 * operator did not look. Options that collect repeats (their own argument parser) are left alone.
 * Call once, after every command is registered.
 */
export function refuseRepeatedOptions(program: Command): void {
  const walk = (cmd: Command): Command[] => [cmd, ...cmd.commands.flatMap(walk)];
  for (const cmd of walk(program)) {
    for (const option of cmd.options) {
      if (!(option.required || option.optional) || option.variadic || option.parseArg) continue;
      let first: string | undefined;
      option.argParser((value: string) => {
        if (first !== undefined) {
          throw new InvalidArgumentError(`${option.long ?? option.flags} was given twice ("${first}", then "${value}"); it takes one value: give it once`);
        }
        first = value;
        return value;
      });
    }
  }
}
