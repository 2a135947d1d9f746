/** Types of test/node-lines.mjs (plain JavaScript: it runs before any of ours is built). */
export interface NodeLine {
  readonly version: string;
  readonly integrity: string;
  readonly image?: boolean;
}
/** Whether `version` is inside package.json engines (`^a.b.c || ^d.e.f`). */
export function claimed(version: string, range?: string): boolean;
/** The folder whose bin/node is the pinned official binary of `line`, fetched and checked once. */
export function nodeHome(line: NodeLine): string;
