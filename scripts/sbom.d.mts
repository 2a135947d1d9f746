/** Types of scripts/sbom.mjs (plain JavaScript: the Dockerfile's build stage runs it with node alone). */
/** The production tree of package-lock.json in `root` (default: this checkout) as a CycloneDX 1.5 document. */
export function sbom(root?: string): unknown;
