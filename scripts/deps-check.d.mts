/** Types of scripts/deps-check.mjs (plain JavaScript: it runs on whatever node is installed). */
export interface InternalsRow {
  readonly library: string;
  readonly pinned: string;
  readonly holds: string;
  readonly reached: string;
  readonly guards: readonly string[];
}
/** The rows of docs/design.md's "Library internals we reach" table. */
export function internalsTable(root?: string): InternalsRow[];
