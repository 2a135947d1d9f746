{{/*
Internal helpers. Every helper here takes the context dict filled by "consent-sidecar.resolve":
  .root  the caller's root context (.Release, .Capabilities, ...)
  .v     the sidecar's values (this chart's .Values, or a parent chart's .Values.consent-sidecar)
  .name  .fullname
Public named templates for your own chart are in _api.tpl.
*/}}

{{/*
Fills the context dict passed in: (dict "in" <caller's context>) gains .root, .v, .name, .fullname.
The caller's context is this chart's root context, a parent chart's root context (the sidecar's
values under its "consent-sidecar" key), or (dict "root" $ "values" $sidecarValues) when the
dependency is aliased.
*/}}
{{- define "consent-sidecar.resolve" -}}
{{- $in := .in -}}
{{- $root := $in -}}
{{- $v := dict -}}
{{- if hasKey $in "root" -}}
{{- $root = $in.root -}}
{{- $v = $in.values -}}
{{- else if hasKey $in.Values "consent-sidecar" -}}
{{- $v = index $in.Values "consent-sidecar" -}}
{{- else -}}
{{- $v = $in.Values -}}
{{- end -}}
{{- $name := default "consent-sidecar" $v.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- $fullname := "" -}}
{{- if $v.fullnameOverride -}}
{{- $fullname = $v.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains $name $root.Release.Name -}}
{{- $fullname = $root.Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $fullname = printf "%s-%s" $root.Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- $_ := set . "root" $root -}}
{{- $_ = set . "v" $v -}}
{{- $_ = set . "name" $name -}}
{{- $_ = set . "fullname" $fullname -}}
{{- include "consent-sidecar.validate" . -}}
{{- end -}}

{{/*
Every missing or conflicting value, reported together in one failure (as the CLI reports its flags),
so an operator fixes them all after one helm template run. Runs in "consent-sidecar.resolve", before
any template uses the values.
*/}}
{{- define "consent-sidecar.validate" -}}
{{- $v := .v -}}
{{- $p := list -}}
{{- if not $v.image.repository -}}
{{- $p = append $p "image.repository is required: the registry path of the sidecar image built from this repository's Dockerfile (e.g. registry.example.com/consent-sidecar)" -}}
{{- end -}}
{{- if not (or $v.image.tag $v.image.digest) -}}
{{- $p = append $p "image.tag is required (or image.digest)" -}}
{{- end -}}
{{- if not $v.config.upstreamUrl -}}
{{- $p = append $p "config.upstreamUrl is required: the consent service's base URL" -}}
{{- end -}}
{{- $s := $v.secrets -}}
{{- if and $s.apiKey.existingSecret $s.apiKey.value -}}
{{- $p = append $p "secrets.apiKey: set existingSecret or value, not both" -}}
{{- else if not (or $s.apiKey.existingSecret $s.apiKey.value) -}}
{{- $p = append $p "secrets.apiKey: the API key is required: set secrets.apiKey.existingSecret (a Secret with key secrets.apiKey.key) or secrets.apiKey.value" -}}
{{- end -}}
{{- if or $v.config.appWebhookUrl $v.config.appWebhookRoute -}}
{{- if and $s.webhookSecrets.existingSecret $s.webhookSecrets.values -}}
{{- $p = append $p "secrets.webhookSecrets: set existingSecret or values, not both" -}}
{{- else if not (or $s.webhookSecrets.existingSecret $s.webhookSecrets.values) -}}
{{- $p = append $p "secrets.webhookSecrets: config.appWebhookUrl turns the webhook ingress on, which needs the signing secrets: set secrets.webhookSecrets.existingSecret or secrets.webhookSecrets.values" -}}
{{- end -}}
{{- if and $s.webhookRequiredHeader.existingSecret $s.webhookRequiredHeader.value -}}
{{- $p = append $p "secrets.webhookRequiredHeader: set existingSecret or value, not both" -}}
{{- end -}}
{{- end -}}
{{- $redis := include "consent-sidecar.redisConfigured" . -}}
{{- if and (eq (toString $v.config.webhookDelivery) "queue") (not $redis) -}}
{{- $p = append $p "config.webhookDelivery: queue keeps events in Redis, which needs a Redis URL: set secrets.redisUrl.existingSecret or config.redisUrl, or a cluster or sentinels (config.redisClusterNodes, config.redisSentinels, or their secrets); the sidecar would exit 2 naming --redis-url" -}}
{{- end -}}
{{- /* Several pods without a shared store: a revocation would reach one of them (README, Several replicas). */ -}}
{{- if and $v.deployment.enabled (gt (int $v.deployment.replicas) 1) (not $redis) (not $v.unsafeUnsharedReplicas) -}}
{{- $p = append $p (printf "deployment.replicas: %d pods without Redis would each deduplicate webhooks and cache ALLOWs on their own, so a revocation delivered to one pod leaves the others answering ALLOW until validUntil: set secrets.redisUrl.existingSecret (or config.redisUrl), or deployment.replicas: 1, or unsafeUnsharedReplicas: true to accept that" (int $v.deployment.replicas)) -}}
{{- end -}}
{{- if and $v.deployment.enabled (not $v.deployment.app.image) -}}
{{- $p = append $p "deployment.app.image is required: your application's image (or set deployment.enabled: false and include the named templates in your own chart)" -}}
{{- end -}}
{{- if and $v.ingress $v.ingress.enabled (not (and $v.deployment.enabled $v.service.enabled (or $v.config.appWebhookUrl $v.config.appWebhookRoute))) -}}
{{- $p = append $p "ingress.enabled: the Ingress routes to this chart's Service's consent-webhook port, which needs deployment.enabled, service.enabled and config.appWebhookUrl (or config.appWebhookRoute)" -}}
{{- end -}}
{{- $sm := $v.monitoring.serviceMonitor -}}
{{- if and $sm.enabled (not $sm.selector) (include "consent-sidecar.monitoringOn" .) (not (and $v.deployment.enabled $v.service.enabled $v.service.metrics)) -}}
{{- $p = append $p "monitoring.serviceMonitor.selector: this chart renders no Service with the consent-metrics port (deployment.enabled, service.enabled or service.metrics is false); set the selector to the labels of your Service that includes \"consent-sidecar.servicePorts\", or disable the ServiceMonitor" -}}
{{- end -}}
{{- range $k := list "podDisruptionBudget" "networkPolicy" -}}
{{- $pol := index $v $k -}}
{{- if and $pol $pol.enabled (not $v.deployment.enabled) (not $pol.podSelector) -}}
{{- $p = append $p (printf "%s.podSelector is required when deployment.enabled is false: the labels of your application's pods" $k) -}}
{{- end -}}
{{- end -}}
{{- if eq (len $p) 1 -}}
{{- fail (printf "consent-sidecar values: %s" (first $p)) -}}
{{- else if $p -}}
{{- fail (printf "\n%d problem(s) with the consent-sidecar values:\n  - %s" (len $p) (join "\n  - " $p)) -}}
{{- end -}}
{{- end -}}

{{/* Chart label value: name-version (this chart's own renders only). */}}
{{- define "consent-sidecar.chart" -}}
{{- printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels: stable for the life of a release. */}}
{{- define "consent-sidecar.selectorLabels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{/* Common labels of everything this chart creates. */}}
{{- define "consent-sidecar.labels" -}}
helm.sh/chart: {{ include "consent-sidecar.chart" . }}
{{ include "consent-sidecar.selectorLabels" . }}
app.kubernetes.io/version: {{ .v.image.tag | default .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/component: consent-sidecar
{{- end -}}

{{/* Name of the standalone Deployment and its Service: the application's (deployment.name, else the release name). */}}
{{- define "consent-sidecar.appName" -}}
{{- default .root.Release.Name .v.deployment.name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels of the standalone Deployment's pods: the application's name, not the sidecar's. */}}
{{- define "consent-sidecar.appSelectorLabels" -}}
app.kubernetes.io/name: {{ include "consent-sidecar.appName" . }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{/* Labels of the standalone Deployment and its Service. */}}
{{- define "consent-sidecar.appLabels" -}}
helm.sh/chart: {{ include "consent-sidecar.chart" . }}
{{ include "consent-sidecar.appSelectorLabels" . }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- end -}}

{{/* Pod labels a policy covers (map entries): its podSelector value, else the standalone Deployment's pods. */}}
{{- define "consent-sidecar.policyPodSelector" -}}
{{- if .podSelector -}}
{{- toYaml .podSelector -}}
{{- else -}}
{{- include "consent-sidecar.appSelectorLabels" .c -}}
{{- end -}}
{{- end -}}

{{/* The sidecar image reference: repository@digest, or repository:tag. */}}
{{- define "consent-sidecar.image" -}}
{{- if .v.image.digest -}}
{{- printf "%s@%s" .v.image.repository .v.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .v.image.repository (required "image.tag is required (or image.digest)" .v.image.tag) -}}
{{- end -}}
{{- end -}}

{{/*
The mode in effect: "native" or "classic". "auto" picks native when Helm sees Kubernetes >= 1.29
(older API servers drop restartPolicy from an initContainer, which would then block the pod's start
for ever), classic otherwise.
*/}}
{{- define "consent-sidecar.mode" -}}
{{- if eq .v.mode "auto" -}}
{{- ternary "native" "classic" (semverCompare ">=1.29.0-0" .root.Capabilities.KubeVersion.Version) -}}
{{- else -}}
{{- .v.mode -}}
{{- end -}}
{{- end -}}

{{/* "true" when the webhook ingress is on (config.appWebhookUrl or config.appWebhookRoute set). */}}
{{- define "consent-sidecar.webhookEnabled" -}}
{{- if or .v.config.appWebhookUrl .v.config.appWebhookRoute -}}true{{- end -}}
{{- end -}}

{{/*
The app signing secret the sidecar signs its forwards with and the app verifies them with
(docs/webhooks.md, Signed forwards), as JSON {secret, key, created}; "" when nothing is forwarded
(webhook ingress off) or signing is off (secrets.appSigningSecret.create: false, no existingSecret).
created: the chart makes it (templates/app-signing-secret.yaml), once per release.
*/}}
{{- define "consent-sidecar.appSigning" -}}
{{- $s := .v.secrets.appSigningSecret -}}
{{- if include "consent-sidecar.webhookEnabled" . -}}
{{- if $s.existingSecret -}}
{{- toJson (dict "secret" $s.existingSecret "key" $s.key "created" false) -}}
{{- else if $s.create -}}
{{- toJson (dict "secret" (printf "%s-app-signing" .fullname | trunc 63 | trimSuffix "-") "key" "app-signing-secret" "created" true) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The file the app container reads the app signing secrets from. */}}
{{- define "consent-sidecar.appSigningFile" -}}
{{- printf "%s/app-signing-secret" (trimSuffix "/" .v.secrets.appSigningSecret.appMountPath) -}}
{{- end -}}

{{/* host:port with brackets around an IPv6 host. */}}
{{- define "consent-sidecar.hostPort" -}}
{{- if contains ":" .host -}}[{{ .host }}]:{{ .port }}{{- else -}}{{ .host }}:{{ .port }}{{- end -}}
{{- end -}}

{{/*
A values scalar as an env var string. Helm reads numbers from values as floats, which print as
1e+06; integers are printed as integers.
*/}}
{{- define "consent-sidecar.scalar" -}}
{{- if and (kindIs "float64" .) (eq (floor .) .) -}}
{{- int64 . -}}
{{- else -}}
{{- toString . -}}
{{- end -}}
{{- end -}}

{{/* Name of the Secret the chart creates from values. */}}
{{- define "consent-sidecar.secretName" -}}
{{- .fullname -}}
{{- end -}}

{{/*
The secret files: list of {file, secret, key, created} for the secrets in use. Fails when a
required secret is missing or given twice.
*/}}
{{- define "consent-sidecar.secretFiles" -}}
{{- $files := list -}}
{{- $s := .v.secrets -}}
{{- $created := include "consent-sidecar.secretName" . -}}
{{- if and $s.apiKey.existingSecret $s.apiKey.value -}}
{{- fail "secrets.apiKey: set existingSecret or value, not both" -}}
{{- else if $s.apiKey.existingSecret -}}
{{- $files = append $files (dict "file" "api-key" "secret" $s.apiKey.existingSecret "key" $s.apiKey.key "created" false) -}}
{{- else if $s.apiKey.value -}}
{{- $files = append $files (dict "file" "api-key" "secret" $created "key" "api-key" "created" true) -}}
{{- else -}}
{{- fail "secrets.apiKey: the API key is required: set secrets.apiKey.existingSecret (a Secret with key secrets.apiKey.key) or secrets.apiKey.value" -}}
{{- end -}}
{{- if include "consent-sidecar.webhookEnabled" . -}}
{{- if and $s.webhookSecrets.existingSecret $s.webhookSecrets.values -}}
{{- fail "secrets.webhookSecrets: set existingSecret or values, not both" -}}
{{- else if $s.webhookSecrets.existingSecret -}}
{{- $files = append $files (dict "file" "webhook-secrets" "secret" $s.webhookSecrets.existingSecret "key" $s.webhookSecrets.key "created" false) -}}
{{- else if $s.webhookSecrets.values -}}
{{- $files = append $files (dict "file" "webhook-secrets" "secret" $created "key" "webhook-secrets" "created" true) -}}
{{- else -}}
{{- fail "secrets.webhookSecrets: config.appWebhookUrl turns the webhook ingress on, which needs the signing secrets: set secrets.webhookSecrets.existingSecret or secrets.webhookSecrets.values" -}}
{{- end -}}
{{- if and $s.webhookRequiredHeader.existingSecret $s.webhookRequiredHeader.value -}}
{{- fail "secrets.webhookRequiredHeader: set existingSecret or value, not both" -}}
{{- else if $s.webhookRequiredHeader.existingSecret -}}
{{- $files = append $files (dict "file" "webhook-required-header" "secret" $s.webhookRequiredHeader.existingSecret "key" $s.webhookRequiredHeader.key "created" false) -}}
{{- else if $s.webhookRequiredHeader.value -}}
{{- $files = append $files (dict "file" "webhook-required-header" "secret" $created "key" "webhook-required-header" "created" true) -}}
{{- end -}}
{{- end -}}
{{- with include "consent-sidecar.appSigning" . -}}
{{- $a := fromJson . -}}
{{- /* Not "created" in the sense of createdSecretData: the chart's app signing Secret is one of its own. */ -}}
{{- $files = append $files (dict "file" "app-signing-secret" "secret" $a.secret "key" $a.key "created" false) -}}
{{- end -}}
{{- /* Several replicas: the Redis URL (credentials inside) from an existing Secret, as a file. */ -}}
{{- if $s.redisUrl.existingSecret -}}
{{- if .v.config.redisUrl -}}
{{- fail "secrets.redisUrl: set secrets.redisUrl.existingSecret or config.redisUrl, not both" -}}
{{- end -}}
{{- $files = append $files (dict "file" "redis-url" "secret" $s.redisUrl.existingSecret "key" $s.redisUrl.key "created" false) -}}
{{- end -}}
{{- if $s.redisClusterNodes.existingSecret -}}
{{- if .v.config.redisClusterNodes -}}
{{- fail "secrets.redisClusterNodes: set secrets.redisClusterNodes.existingSecret or config.redisClusterNodes, not both" -}}
{{- end -}}
{{- $files = append $files (dict "file" "redis-cluster-nodes" "secret" $s.redisClusterNodes.existingSecret "key" $s.redisClusterNodes.key "created" false) -}}
{{- end -}}
{{- if $s.redisSentinels.existingSecret -}}
{{- if .v.config.redisSentinels -}}
{{- fail "secrets.redisSentinels: set secrets.redisSentinels.existingSecret or config.redisSentinels, not both" -}}
{{- end -}}
{{- $files = append $files (dict "file" "redis-sentinels" "secret" $s.redisSentinels.existingSecret "key" $s.redisSentinels.key "created" false) -}}
{{- end -}}
{{- if $s.redisTlsCa.existingSecret -}}
{{- $files = append $files (dict "file" "redis-tls-ca" "secret" $s.redisTlsCa.existingSecret "key" $s.redisTlsCa.key "created" false) -}}
{{- end -}}
{{- toJson $files -}}
{{- end -}}

{{/* "true" when the sidecar is told where Redis is (one Redis, a cluster or sentinels: a value, a Secret file, or an extraEnv variable); "" otherwise. */}}
{{- define "consent-sidecar.redisConfigured" -}}
{{- $v := .v -}}
{{- $fromEnv := false -}}
{{- range $e := $v.extraEnv -}}
{{- if or (hasPrefix "CONSENT_SIDECAR_REDIS_URL" $e.name) (hasPrefix "CONSENT_SIDECAR_REDIS_CLUSTER_NODES" $e.name) (hasPrefix "CONSENT_SIDECAR_REDIS_SENTINELS" $e.name) -}}{{- $fromEnv = true -}}{{- end -}}
{{- end -}}
{{- $s := $v.secrets -}}
{{- if or $v.config.redisUrl $v.config.redisClusterNodes $v.config.redisSentinels $s.redisUrl.existingSecret $s.redisClusterNodes.existingSecret $s.redisSentinels.existingSecret $fromEnv -}}true{{- end -}}
{{- end -}}

{{/*
A CLI command as an operator runs it in a pod (runbooks, install notes): the image has no shell and
no consent-sidecar on PATH, so node and the CLI by their paths in the image (Dockerfile: ENTRYPOINT
/nodejs/bin/node /app/dist/cli.js). Run in the sidecar container, the command gets the container's
environment: the same CONSENT_SIDECAR_* variables serve reads, and its mounted secret files.
Takes (dict "c" <context> "args" "<command and flags>").
*/}}
{{- define "consent-sidecar.cliCommand" -}}
{{- $c := .c -}}
{{- $v := $c.v -}}
{{- $target := ternary (printf "deploy/%s" (include "consent-sidecar.appName" $c)) "<your-pod>" (and $v.deployment.enabled true) -}}
{{- printf "kubectl -n %s exec %s -c consent-sidecar -- %s /app/dist/cli.js %s" $c.root.Release.Namespace $target $v.image.nodeBinary .args -}}
{{- end -}}

{{/*
`webhook dead-letters <verb>` as an operator runs it in a pod, with the Redis flags serve gets (the
URL file the chart mounts, the key prefix). Takes (dict "c" <context> "verb" "list" or "replay --all").
*/}}
{{- define "consent-sidecar.deadLettersCommand" -}}
{{- $v := .c.v -}}
{{- $url := "" -}}
{{- if $v.secrets.redisUrl.existingSecret -}}
{{- $url = printf " --redis-url-file %s/redis-url" (trimSuffix "/" $v.secrets.mountPath) -}}
{{- end -}}
{{- include "consent-sidecar.cliCommand" (dict "c" .c "args" (printf "webhook dead-letters %s%s --redis-key-prefix %s" .verb $url (default "consent-sidecar:" $v.config.redisKeyPrefix | squote))) -}}
{{- end -}}

{{/*
"true" when the REDEC reconciler runs: config.redecReconcileIntervalMs above 0, or left unset
with the webhook ingress on (the sidecar's default: on only with --app-webhook-url).
*/}}
{{- define "consent-sidecar.redecReconcilerOn" -}}
{{- $i := .v.config.redecReconcileIntervalMs -}}
{{- if or (kindIs "invalid" $i) (eq (toString $i) "") -}}
{{- include "consent-sidecar.webhookEnabled" . -}}
{{- else if gt (int64 $i) 0 -}}true{{- end -}}
{{- end -}}

{{/* Data of the Secret the chart creates (only the secrets given by value). */}}
{{- define "consent-sidecar.createdSecretData" -}}
{{- $data := dict -}}
{{- $s := .v.secrets -}}
{{- range $f := include "consent-sidecar.secretFiles" . | fromJsonArray -}}
{{- if $f.created -}}
{{- if eq $f.file "api-key" -}}
{{- $_ := set $data "api-key" $s.apiKey.value -}}
{{- else if eq $f.file "webhook-secrets" -}}
{{- $_ := set $data "webhook-secrets" (printf "%s\n" (join "\n" $s.webhookSecrets.values)) -}}
{{- else if eq $f.file "webhook-required-header" -}}
{{- $_ := set $data "webhook-required-header" $s.webhookRequiredHeader.value -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $data -}}
{{- end -}}

{{/*
Checksum of everything that shapes the sidecar container and the Secret the chart creates, for the
pod template annotation: a change rolls the pods. Secrets from existingSecret are not included:
their files are re-read live when the Secret rotates.
*/}}
{{- define "consent-sidecar.checksum" -}}
{{- $in := dict "mode" (include "consent-sidecar.mode" .) "image" .v.image "ports" .v.ports "grpc" .v.grpc "bindAddress" .v.bindAddress "config" .v.config "extraEnv" .v.extraEnv "resources" .v.resources "securityContext" .v.securityContext "probes" .v.probes "classic" .v.classic "files" (include "consent-sidecar.secretFiles" .) "data" (include "consent-sidecar.createdSecretData" .) -}}
{{- toJson $in | sha256sum -}}
{{- end -}}

{{/* The sidecar container (one list item). In native mode it carries restartPolicy: Always. */}}
{{- define "consent-sidecar.containerSpec" -}}
{{- $v := .v -}}
{{- $webhook := include "consent-sidecar.webhookEnabled" . -}}
{{- $files := include "consent-sidecar.secretFiles" . | fromJsonArray -}}
{{- $mount := trimSuffix "/" $v.secrets.mountPath -}}
- name: consent-sidecar
  image: {{ include "consent-sidecar.image" . | quote }}
  imagePullPolicy: {{ $v.image.pullPolicy }}
  args: ["serve"]
  {{- if eq (include "consent-sidecar.mode" .) "native" }}
  restartPolicy: Always
  {{- end }}
  env:
    - name: CONSENT_SIDECAR_UPSTREAM_URL
      value: {{ required "config.upstreamUrl is required: the consent service's base URL" $v.config.upstreamUrl | quote }}
    - name: CONSENT_SIDECAR_LISTEN
      {{- if $v.decisionSocket.enabled }}
      value: {{ printf "unix:%s/decision.sock" $v.decisionSocket.mountPath | quote }}
      {{- else }}
      value: {{ include "consent-sidecar.hostPort" (dict "host" "127.0.0.1" "port" (include "consent-sidecar.scalar" $v.ports.decision)) | quote }}
      {{- end }}
    - name: CONSENT_SIDECAR_WEBHOOK_LISTEN
      value: {{ include "consent-sidecar.hostPort" (dict "host" $v.bindAddress "port" (include "consent-sidecar.scalar" $v.ports.webhook)) | quote }}
    - name: CONSENT_SIDECAR_ADMIN_LISTEN
      value: {{ include "consent-sidecar.hostPort" (dict "host" $v.bindAddress "port" (include "consent-sidecar.scalar" $v.ports.admin)) | quote }}
    {{- if $v.grpc.enabled }}
    - name: CONSENT_SIDECAR_GRPC_LISTEN
      value: {{ include "consent-sidecar.hostPort" (dict "host" $v.grpc.bindAddress "port" (include "consent-sidecar.scalar" $v.grpc.port)) | quote }}
    {{- end }}
    {{- range $f := $files }}
    - name: {{ printf "CONSENT_SIDECAR_%s_FILE" (ternary "WEBHOOK_SECRET" ($f.file | upper | replace "-" "_") (eq $f.file "webhook-secrets")) }}
      value: {{ printf "%s/%s" $mount $f.file | quote }}
    {{- end }}
    {{- range $key, $value := $v.config }}
    {{- if and (ne $key "upstreamUrl") (not (kindIs "invalid" $value)) (ne (toString $value) "") }}
    - name: {{ printf "CONSENT_SIDECAR_%s" ($key | snakecase | upper) }}
      {{- if kindIs "slice" $value }}
      {{- /* A repeatable flag: one value per line. */}}
      value: {{ join "\n" $value | quote }}
      {{- else }}
      value: {{ include "consent-sidecar.scalar" $value | quote }}
      {{- end }}
    {{- end }}
    {{- end }}
    {{- with $v.tracing }}
    {{- if .endpoint }}
    - name: OTEL_EXPORTER_OTLP_ENDPOINT
      value: {{ .endpoint | quote }}
    - name: OTEL_TRACES_SAMPLER
      value: {{ .sampler | quote }}
    - name: OTEL_TRACES_SAMPLER_ARG
      value: {{ include "consent-sidecar.scalar" .samplerArg | quote }}
    {{- with .serviceName }}
    - name: OTEL_SERVICE_NAME
      value: {{ . | quote }}
    {{- end }}
    {{- with .resourceAttributes }}
    - name: OTEL_RESOURCE_ATTRIBUTES
      value: {{ . | quote }}
    {{- end }}
    {{- end }}
    {{- end }}
    {{- with $v.extraEnv }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  ports:
    {{- if $webhook }}
    - name: consent-webhook
      containerPort: {{ include "consent-sidecar.scalar" $v.ports.webhook }}
      protocol: TCP
    {{- end }}
    - name: consent-metrics
      containerPort: {{ include "consent-sidecar.scalar" $v.ports.admin }}
      protocol: TCP
    {{- if $v.grpc.enabled }}
    - name: consent-grpc
      containerPort: {{ include "consent-sidecar.scalar" $v.grpc.port }}
      protocol: TCP
    {{- end }}
  startupProbe:
    httpGet:
      path: /readyz
      port: consent-metrics
    periodSeconds: {{ include "consent-sidecar.scalar" $v.probes.startup.periodSeconds }}
    timeoutSeconds: {{ include "consent-sidecar.scalar" $v.probes.startup.timeoutSeconds }}
    failureThreshold: {{ include "consent-sidecar.scalar" $v.probes.startup.failureThreshold }}
  readinessProbe:
    httpGet:
      path: /readyz
      port: consent-metrics
    periodSeconds: {{ include "consent-sidecar.scalar" $v.probes.readiness.periodSeconds }}
    timeoutSeconds: {{ include "consent-sidecar.scalar" $v.probes.readiness.timeoutSeconds }}
    failureThreshold: {{ include "consent-sidecar.scalar" $v.probes.readiness.failureThreshold }}
  livenessProbe:
    httpGet:
      path: /healthz
      port: consent-metrics
    periodSeconds: {{ include "consent-sidecar.scalar" $v.probes.liveness.periodSeconds }}
    timeoutSeconds: {{ include "consent-sidecar.scalar" $v.probes.liveness.timeoutSeconds }}
    failureThreshold: {{ include "consent-sidecar.scalar" $v.probes.liveness.failureThreshold }}
  {{- if eq (include "consent-sidecar.mode" .) "classic" }}
  {{- $hold := $v.classic.holdApplicationUntilReady }}
  {{- $delay := int64 $v.classic.preStopDelaySeconds }}
  {{- if or $hold (gt $delay 0) }}
  lifecycle:
    {{- if $hold }}
    # Kubernetes starts the next container only once this hook returns: the application waits
    # until the sidecar answers /readyz. No shell in the image, so node polls.
    postStart:
      exec:
        command:
          - {{ $v.image.nodeBinary }}
          - -e
          - {{ printf "const h=require('node:http'),end=Date.now()+%d*1000;function again(){Date.now()>end?process.exit(1):setTimeout(poll,200)}function poll(){const r=h.get('http://127.0.0.1:%s/readyz',s=>{s.resume();s.statusCode===200?process.exit(0):again()});r.on('error',again);r.setTimeout(1000,()=>r.destroy())}poll()" (int64 $v.classic.holdTimeoutSeconds) (include "consent-sidecar.scalar" $v.ports.admin) | quote }}
    {{- end }}
    {{- if gt $delay 0 }}
    # The sidecar keeps serving the application's last calls before it gets SIGTERM.
    preStop:
      {{- if eq $v.classic.preStopMethod "sleepAction" }}
      sleep:
        seconds: {{ $delay }}
      {{- else }}
      exec:
        command:
          - {{ $v.image.nodeBinary }}
          - -e
          - {{ printf "setTimeout(()=>{},%d*1000)" $delay | quote }}
      {{- end }}
    {{- end }}
  {{- end }}
  {{- end }}
  {{- with $v.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml $v.securityContext | nindent 4 }}
  volumeMounts:
    - name: consent-sidecar-secrets
      mountPath: {{ $mount | quote }}
      readOnly: true
    {{- if $v.decisionSocket.enabled }}
    - name: consent-sidecar-socket
      mountPath: {{ $v.decisionSocket.mountPath | quote }}
    {{- end }}
{{- end -}}

{{/*
The sidecar's pod volumes (list items): one projected volume with every secret file (the sidecar's
alone), and, with signed forwards, one holding only the app signing secret, for the app.
*/}}
{{- define "consent-sidecar.volumesSpec" -}}
{{- if .v.decisionSocket.enabled -}}
- name: consent-sidecar-socket
  emptyDir:
    medium: Memory
    sizeLimit: 1Mi
{{ end -}}
- name: consent-sidecar-secrets
  projected:
    defaultMode: {{ include "consent-sidecar.scalar" .v.secrets.defaultMode }}
    sources:
      {{- range $f := include "consent-sidecar.secretFiles" . | fromJsonArray }}
      - secret:
          name: {{ $f.secret | quote }}
          items:
            - key: {{ $f.key | quote }}
              path: {{ $f.file }}
      {{- end }}
{{- with include "consent-sidecar.appSigning" . }}
{{- $a := fromJson . }}
- name: consent-sidecar-app-signing
  secret:
    secretName: {{ $a.secret | quote }}
    defaultMode: {{ include "consent-sidecar.scalar" $.v.secrets.defaultMode }}
    items:
      - key: {{ $a.key | quote }}
        path: app-signing-secret
{{- end }}
{{- end -}}

{{/* The sidecar's Service ports (list items). */}}
{{- define "consent-sidecar.servicePortsSpec" -}}
{{- if include "consent-sidecar.webhookEnabled" . }}
- name: consent-webhook
  port: {{ include "consent-sidecar.scalar" .v.ports.webhook }}
  targetPort: consent-webhook
  protocol: TCP
{{- end }}
{{- if .metrics }}
- name: consent-metrics
  port: {{ include "consent-sidecar.scalar" .v.ports.admin }}
  targetPort: consent-metrics
  protocol: TCP
{{- end }}
{{- end -}}

{{/* "true" when the ServiceMonitor/PrometheusRule API should be used. */}}
{{- define "consent-sidecar.monitoringOn" -}}
{{- $mode := .v.monitoring.mode -}}
{{- if or (eq $mode "always") (and (eq $mode "auto") (.root.Capabilities.APIVersions.Has "monitoring.coreos.com/v1")) -}}true{{- end -}}
{{- end -}}

{{/* Value of the job label of the sidecar's series. */}}
{{- define "consent-sidecar.jobName" -}}
{{- default .fullname .v.monitoring.jobName -}}
{{- end -}}

{{/*
The reason label values of consent_sidecar_webhook_rejections_total that mean a delivery failed
authentication (401), as a regex alternation. test/packaging/runbooks.test.ts ties it to the codes
in src/webhooks/errors.ts.
*/}}
{{- define "consent-sidecar.authRejectionReasons" -}}
required_header_missing|required_header_mismatch|header_repeated|timestamp_missing|signature_missing|signature_scheme|timestamp_invalid|timestamp_too_old|timestamp_too_new|signature_mismatch|unverified_budget_exhausted|body_timeout
{{- end -}}
