import type { Logger } from './logger.js';
import { diagnosticsTo } from './tracing-diag.js';
import { Tracing, type TracingOptions } from './tracing.js';

/**
 * Starts OpenTelemetry tracing when `options` says so (an OTLP endpoint configured), loading the
 * SDK only then: with tracing off nothing of it is even imported. Spans go to the endpoint the
 * standard variables give (`OTEL_EXPORTER_OTLP_ENDPOINT` or `…_TRACES_ENDPOINT`), OTLP over HTTP
 * with the JSON encoding, in batches; the resource is ours (`service.name` consent-sidecar, its
 * version) under what `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` say.
 */
export async function startTracing(options: TracingOptions | null, deps: { upstreamUrl: URL; version: string; logger: Logger }): Promise<Tracing> {
  if (!options) return Tracing.OFF;
  const [api, sdk, { OTLPTraceExporter }, resources, { W3CTraceContextPropagator }] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/sdk-trace'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/core'),
  ]);
  const ratio = new sdk.TraceIdRatioBasedSampler(options.ratio);
  const sampler = {
    always_on: new sdk.AlwaysOnSampler(),
    always_off: new sdk.AlwaysOffSampler(),
    traceidratio: ratio,
    parentbased_always_on: new sdk.ParentBasedSampler({ root: new sdk.AlwaysOnSampler() }),
    parentbased_always_off: new sdk.ParentBasedSampler({ root: new sdk.AlwaysOffSampler() }),
    parentbased_traceidratio: new sdk.ParentBasedSampler({ root: ratio }),
  }[options.sampler];
  api.diag.setLogger(diagnosticsTo(deps.logger), { logLevel: api.DiagLogLevel.WARN, suppressOverrideMessage: true });
  const resource = resources
    .defaultResource()
    .merge(resources.resourceFromAttributes({ 'service.name': 'consent-sidecar', 'service.version': deps.version }))
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));
  const processor = new sdk.BatchSpanProcessor({ exporter: new OTLPTraceExporter(), scheduledDelayMillis: options.scheduleDelayMs });
  const provider = new sdk.TracerProvider({ sampler, resource, spanProcessors: [processor] });
  const tracer = provider.getTracer('consent-sidecar', deps.version);
  deps.logger.info({ event: 'tracing_on', sampler: options.sampler, ratio: options.ratio }, 'OpenTelemetry spans on (OTLP over HTTP)');
  return Tracing.on(api, tracer, new W3CTraceContextPropagator(), deps.upstreamUrl, () => provider.shutdown());
}
