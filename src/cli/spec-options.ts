import { Option, type Command } from 'commander';
import { envName, type OptionSpec, type RawFlags } from '../config/index.js';

const camel = (name: string): string => name.replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());

/**
 * Adds the options of a spec table to a command. Defaults and variables are resolved by
 * `src/config` (not by commander) so the flag-over-variable rule and validation live in one place.
 */
export function addSpecOptions(cmd: Command, specs: readonly OptionSpec[]): Command {
  for (const spec of specs) {
    const defaults = spec.defaultText === undefined ? '' : ` (default: ${spec.defaultText})`;
    const option = new Option(`--${spec.name} ${spec.arg}`, `${spec.description}${defaults} [${envName(spec.name)}]`);
    if (spec.repeatable) option.argParser((value: string, previous: string[] | undefined) => [...(previous ?? []), value]);
    cmd.addOption(option);
  }
  return cmd;
}

/** The parsed values keyed by flag name, for `loadServeConfig` / `resolveUpstreamConfig`. */
export function rawFlags(cmd: Command, specs: readonly OptionSpec[]): RawFlags {
  const opts = cmd.opts<Record<string, string | string[] | undefined>>();
  const out: Record<string, string | readonly string[] | undefined> = {};
  for (const spec of specs) out[spec.name] = opts[camel(spec.name)];
  return out;
}
