/** The data subject request event types of the catalog. */
export const DSR_EVENT_TYPES = [
  'data_subject_request.created',
  'data_subject_request.resolved',
  'data_subject_request.review_started',
  'data_subject_request.additional_information_requested',
  'data_subject_request.additional_information_received',
  'data_subject_request.deadline_extended',
  'data_subject_request.fulfillment_confirmed',
] as const;

/** Every event type of the interface document's catalog. */
export const EVENT_TYPES = [
  'consent_action.created',
  'redec.consent_artifact.ready',
  'redec.notification.required',
  'redec.access.occurred',
  'redec.access.failed',
  'redec.access.cancelled',
  ...DSR_EVENT_TYPES,
] as const;

export type EventType = (typeof EVENT_TYPES)[number];
export type DsrEventType = (typeof DSR_EVENT_TYPES)[number];

/** The JSON body of every delivery. `occurredAt` is epoch ms; `sequence` is global and monotonic. */
export interface EventEnvelope {
  readonly id: string;
  readonly sequence: number;
  readonly type: string;
  readonly occurredAt: number;
  readonly data: Readonly<Record<string, unknown>>;
}

export function isEventType(value: unknown): value is EventType {
  return typeof value === 'string' && (EVENT_TYPES as readonly string[]).includes(value);
}
