import { describe, expect, it } from 'vitest';
import type { Logger } from '../../src/observability/index.js';
import { diagnosticsTo } from '../../src/observability/tracing-diag.js';

describe("OpenTelemetry's diagnostics as our log", () => {
  it('one tracing_export_problem line a minute, with the count held back, the detail bounded', () => {
    const lines: Record<string, unknown>[] = [];
    const logger = { warn: (o: Record<string, unknown>) => void lines.push(o) } as unknown as Logger;
    let now = 1_000_000;
    const diag = diagnosticsTo(logger, () => now);
    diag.error('{"stack":"Error: connect ECONNREFUSED 127.0.0.1:4318"}');
    diag.warn('Dropped 12 spans because maxQueueSize reached');
    diag.error('again', new Error('connect ECONNREFUSED'));
    diag.info('Export failed after maximum retry attempts');
    expect(lines).toEqual([{ event: 'tracing_export_problem', level_from_sdk: 'error', detail: '{"stack":"Error: connect ECONNREFUSED 127.0.0.1:4318"}', suppressed: 0 }]);
    now += 60_000;
    diag.warn('x'.repeat(500), 'more');
    expect(lines[1]).toMatchObject({ level_from_sdk: 'warn', suppressed: 2 });
    expect(String(lines[1]!.detail)).toHaveLength(200);
  });
});
