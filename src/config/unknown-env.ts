import { ENV_PREFIX, envName, SERVE_OPTIONS } from './options.js';

export { ENV_PREFIX };

/** A `CONSENT_SIDECAR_*` variable no flag reads, with the nearest one that exists. */
export interface UnknownVariable {
  readonly name: string;
  readonly suggestion?: string;
}

/** Edit distance (Levenshtein), for "did you mean". */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_v, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length]!;
}

/**
 * The `CONSENT_SIDECAR_*` variables of `env` that no flag reads (a misspelt variable is otherwise
 * ignored silently), each with the closest known name when one is near enough. Never the values.
 */
export function unknownEnvVariables(env: Readonly<Record<string, string | undefined>> = process.env): UnknownVariable[] {
  const known = SERVE_OPTIONS.map((o) => envName(o.name));
  const knownSet = new Set(known);
  const out: UnknownVariable[] = [];
  for (const name of Object.keys(env).sort()) {
    if (!name.startsWith(ENV_PREFIX) || knownSet.has(name)) continue;
    let best: string | undefined;
    let bestDistance = Number.POSITIVE_INFINITY;
    for (const k of known) {
      const d = distance(name, k);
      if (d < bestDistance) [best, bestDistance] = [k, d];
    }
    // Near enough to be a typo: a few edits, relative to the name's length.
    const near = best !== undefined && bestDistance <= Math.max(2, Math.floor((name.length - ENV_PREFIX.length) / 3));
    out.push(near ? { name, suggestion: best } : { name });
  }
  return out;
}
