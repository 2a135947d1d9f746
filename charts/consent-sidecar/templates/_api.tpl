{{/*
Public named templates: add the sidecar to a pod spec in your own chart. Your chart depends on
this one (values under "consent-sidecar", with deployment.enabled: false) and calls each template
with its root context:

  spec:
    template:
      metadata:
        annotations:
          {{- include "consent-sidecar.podAnnotations" . | nindent 8 }}
      spec:
        initContainers:
          {{- include "consent-sidecar.initContainers" . | nindent 10 }}
        containers:
          {{- include "consent-sidecar.containers" . | nindent 10 }}
          - name: app
            env:
              - name: CONSENT_SIDECAR_URL
                value: {{ include "consent-sidecar.decisionUrl" . | quote }}
              {{- include "consent-sidecar.appEnv" . | nindent 14 }}
            volumeMounts:
              {{- include "consent-sidecar.appVolumeMounts" . | nindent 14 }}
        volumes:
          {{- include "consent-sidecar.volumes" . | nindent 10 }}

and in its Service:  ports: {{- include "consent-sidecar.servicePorts" . | nindent 4 }}

initContainers/containers each render the sidecar or nothing, depending on `mode` (with "auto", on
the Kubernetes version Helm sees: pass --kube-version to helm template), so include both.
In classic mode keep the sidecar first in `containers`. With an aliased dependency pass
(dict "root" $ "values" .Values.<alias>) instead of ".".
*/}}

{{/* The sidecar as an initContainer list item (mode: native), or nothing. */}}
{{- define "consent-sidecar.initContainers" -}}
{{- $c := dict "in" . -}}
{{- include "consent-sidecar.resolve" $c -}}
{{- if eq (include "consent-sidecar.mode" $c) "native" -}}
{{- include "consent-sidecar.containerSpec" $c -}}
{{- end -}}
{{- end -}}

{{/* The sidecar as a container list item (mode: classic), or nothing. */}}
{{- define "consent-sidecar.containers" -}}
{{- $c := dict "in" . -}}
{{- include "consent-sidecar.resolve" $c -}}
{{- if eq (include "consent-sidecar.mode" $c) "classic" -}}
{{- include "consent-sidecar.containerSpec" $c -}}
{{- end -}}
{{- end -}}

{{/* The sidecar's pod volumes (list items). */}}
{{- define "consent-sidecar.volumes" -}}
{{- $c := dict "in" . -}}
{{- include "consent-sidecar.resolve" $c -}}
{{- include "consent-sidecar.volumesSpec" $c -}}
{{- end -}}

{{/* The sidecar's Service ports (list items): consent-webhook (when on) and consent-metrics. */}}
{{- define "consent-sidecar.servicePorts" -}}
{{- $c := dict "in" . -}}
{{- include "consent-sidecar.resolve" $c -}}
{{- $_ := set $c "metrics" true -}}
{{- include "consent-sidecar.servicePortsSpec" $c -}}
{{- end -}}

{{/* Pod template annotations (map entries): a checksum that rolls the pods on configuration change. */}}
{{- define "consent-sidecar.podAnnotations" -}}
{{- $c := dict "in" . -}}
{{- include "consent-sidecar.resolve" $c -}}
checksum/consent-sidecar: {{ include "consent-sidecar.checksum" $c }}
{{- end -}}

{{/* URL of the decision API for the application: http://127.0.0.1:<ports.decision>, or unix:<path> with decisionSocket. */}}
{{- define "consent-sidecar.decisionUrl" -}}
{{- $c := dict "in" . -}}
{{- include "consent-sidecar.resolve" $c -}}
{{- if $c.v.decisionSocket.enabled -}}
{{- printf "unix:%s/decision.sock" $c.v.decisionSocket.mountPath -}}
{{- else -}}
{{- printf "http://127.0.0.1:%s" (include "consent-sidecar.scalar" $c.v.ports.decision) -}}
{{- end -}}
{{- end -}}

{{/*
The application container's volumeMounts list items: the decision socket (decisionSocket.enabled)
and the app signing secret (signed forwards: secrets.appSigningSecret); nothing when both are off.
*/}}
{{- define "consent-sidecar.appVolumeMounts" -}}
{{- $c := dict "in" . -}}
{{- include "consent-sidecar.resolve" $c -}}
{{- $mounts := list -}}
{{- if $c.v.decisionSocket.enabled -}}
{{- $mounts = append $mounts (dict "name" "consent-sidecar-socket" "mountPath" $c.v.decisionSocket.mountPath) -}}
{{- end -}}
{{- if include "consent-sidecar.appSigning" $c -}}
{{- $mounts = append $mounts (dict "name" "consent-sidecar-app-signing" "mountPath" $c.v.secrets.appSigningSecret.appMountPath "readOnly" true) -}}
{{- end -}}
{{- with $mounts -}}{{- toYaml . -}}{{- end -}}
{{- end -}}

{{/*
The application container's env list items: with signed forwards, the path of the app signing
secret file (secrets.appSigningSecret.appEnv, CONSENT_SIDECAR_APP_SIGNING_SECRET_FILE), the file
the app verifies each forward with (verifyForwardedEvent). Nothing when signing is off.
*/}}
{{- define "consent-sidecar.appEnv" -}}
{{- $c := dict "in" . -}}
{{- include "consent-sidecar.resolve" $c -}}
{{- if include "consent-sidecar.appSigning" $c -}}
{{- toYaml (list (dict "name" $c.v.secrets.appSigningSecret.appEnv "value" (include "consent-sidecar.appSigningFile" $c))) -}}
{{- end -}}
{{- end -}}
