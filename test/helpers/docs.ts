import { readdirSync, readFileSync } from 'node:fs';

const ROOT = new URL('../../', import.meta.url);

/** README.md, the front door. */
export const readmeText = (): string => readFileSync(new URL('README.md', ROOT), 'utf8');

/** One page of the manual, e.g. `configuration.md`. */
export const docText = (page: string): string => readFileSync(new URL(`docs/${page}`, ROOT), 'utf8');

/** Every page of the manual by file name (docs/*.md). */
export function docPages(): Map<string, string> {
  const pages = new Map<string, string>();
  for (const f of readdirSync(new URL('docs/', ROOT)).filter((f) => f.endsWith('.md')).sort()) pages.set(f, docText(f));
  return pages;
}

/** What a user can read: the README and every page of docs/, joined. */
export function allDocs(): string {
  return [readmeText(), ...docPages().values()].join('\n');
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes. */
export function anchorOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The anchors of a markdown text's headings (outside fenced code). */
export function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    else if (!fenced && /^#{1,6} /.test(line)) anchors.add(anchorOf(line.replace(/^#+ /, '')));
  }
  return anchors;
}
