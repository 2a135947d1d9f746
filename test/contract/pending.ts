/**
 * Server features the document describes that the sidecar on this branch does not serve yet. The
 * contract tests of a pending feature are skipped (test/contract/batch-and-ids.contract.test.ts),
 * and a header it adds is judged only where it is present. Empty this list when the server side
 * lands: every test then runs, and the document holds the server to it.
 */
export const PENDING_SERVER_FEATURES: readonly PendingFeature[] = ['batch-route', 'decision-ids'];

export type PendingFeature =
  /** `POST /sidecar/authorization/check-batch`. */
  | 'batch-route'
  /** `x-consent-decision-id` on every decision answer. */
  | 'decision-ids';

export const pending = (f: PendingFeature): boolean => PENDING_SERVER_FEATURES.includes(f);

/** Headers the document requires that are judged only where present while their feature is pending. */
export const notYetRequiredHeaders = (): string[] => (pending('decision-ids') ? ['x-consent-decision-id'] : []);
