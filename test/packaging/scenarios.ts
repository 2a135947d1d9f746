import { join } from 'node:path';
import { CHART } from '../helpers/helm.js';

export const MONITORING_API = 'monitoring.coreos.com/v1';

/** One `ci/*-values.yaml` file and how CI renders it. */
export interface Scenario {
  readonly file: string;
  /** --kube-version for helm template. */
  readonly kubeVersion: string;
  /** --api-versions: the cluster's extra APIs. */
  readonly apiVersions: readonly string[];
  /** Whether the ServiceMonitor and PrometheusRule must be rendered. */
  readonly monitoring: boolean;
  /** Whether the chart renders its own Deployment. */
  readonly deployment: boolean;
}

export const SCENARIOS: readonly Scenario[] = [
  { file: 'native-values.yaml', kubeVersion: '1.29.0', apiVersions: [], monitoring: false, deployment: true },
  { file: 'classic-values.yaml', kubeVersion: '1.27.0', apiVersions: [], monitoring: false, deployment: true },
  { file: 'monitoring-on-values.yaml', kubeVersion: '1.29.0', apiVersions: [MONITORING_API], monitoring: true, deployment: true },
  { file: 'monitoring-forced-values.yaml', kubeVersion: '1.29.0', apiVersions: [], monitoring: true, deployment: true },
  { file: 'monitoring-off-values.yaml', kubeVersion: '1.29.0', apiVersions: [MONITORING_API], monitoring: false, deployment: true },
  { file: 'existing-secrets-values.yaml', kubeVersion: '1.30.0', apiVersions: [], monitoring: false, deployment: true },
  { file: 'replicas-redis-values.yaml', kubeVersion: '1.29.0', apiVersions: [], monitoring: false, deployment: true },
  { file: 'queue-values.yaml', kubeVersion: '1.29.0', apiVersions: [], monitoring: false, deployment: true },
  { file: 'policies-values.yaml', kubeVersion: '1.29.0', apiVersions: [], monitoring: false, deployment: true },
  { file: 'tracing-values.yaml', kubeVersion: '1.29.0', apiVersions: [], monitoring: false, deployment: true },
  { file: 'grpc-values.yaml', kubeVersion: '1.29.0', apiVersions: [], monitoring: false, deployment: true },
  { file: 'include-values.yaml', kubeVersion: '1.29.0', apiVersions: [MONITORING_API], monitoring: true, deployment: false },
];

export const valuesPath = (s: Scenario): string => join(CHART, 'ci', s.file);
