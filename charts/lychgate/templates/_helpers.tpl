{{/*
Base name: `lychgate`, or `lychgate-<nameOverride>` (spec §2.6.1: nameOverride adds a suffix).
*/}}
{{- define "lychgate.name" -}}
{{- if .Values.nameOverride -}}
{{- printf "%s-%s" .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- .Chart.Name -}}
{{- end -}}
{{- end -}}

{{/*
Full name of the controller's Deployment, Service and ServiceAccount (and of the objects
that belong to them). Not prefixed by the release name: users port-forward to
`deploy/lychgate`, and the spec's default full name is `lychgate`.
*/}}
{{- define "lychgate.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- include "lychgate.name" . -}}
{{- end -}}
{{- end -}}

{{/*
Cluster-scoped RBAC objects carry the namespace so that two installations do not fight
over one ClusterRole.
*/}}
{{- define "lychgate.clusterScopedName" -}}
{{- printf "%s-%s" (include "lychgate.fullname" .) .Release.Namespace | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "lychgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lychgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{/*
Labels of every object: the standard set, overridden by commonLabels, overridden in turn by
the selector labels (a commonLabel must not detach the pods from their Deployment/Service).
*/}}
{{- define "lychgate.labels" -}}
{{- $labels := dict
  "helm.sh/chart" (printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-")
  "app.kubernetes.io/managed-by" .Release.Service
  "app.kubernetes.io/version" .Chart.AppVersion
  "app.kubernetes.io/part-of" "lychgate"
-}}
{{- $labels = mustMergeOverwrite $labels (deepCopy (.Values.commonLabels | default dict)) -}}
{{- $labels = mustMergeOverwrite $labels (fromYaml (include "lychgate.selectorLabels" .)) -}}
{{- toYaml $labels -}}
{{- end -}}

{{- define "lychgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "lychgate.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{/* `controller.image.*` overrides `image.*` key by key; the tag falls back to appVersion. */}}
{{- define "lychgate.controllerImage" -}}
{{- $registry := .Values.controller.image.registry | default .Values.image.registry -}}
{{- $tag := .Values.controller.image.tag | default .Values.image.tag | default .Chart.AppVersion -}}
{{- if $registry -}}
{{- printf "%s/%s:%s" (trimSuffix "/" $registry) .Values.controller.image.repository $tag -}}
{{- else -}}
{{- printf "%s:%s" .Values.controller.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{- define "lychgate.controllerPullPolicy" -}}
{{- .Values.controller.image.pullPolicy | default .Values.image.pullPolicy -}}
{{- end -}}

{{/* Container ports are fixed: the controller listens where LYCHGATE_*_ADDRESS says. */}}
{{- define "lychgate.port.xds" -}}9977{{- end -}}
{{- define "lychgate.port.agentgatewayXds" -}}9978{{- end -}}
{{- define "lychgate.port.health" -}}9093{{- end -}}
{{- define "lychgate.port.metrics" -}}9092{{- end -}}
{{- define "lychgate.port.admin" -}}9095{{- end -}}

{{/* Where the xDS TLS Secret is mounted; the controller reads it via LYCHGATE_XDS_TLS_DIR. */}}
{{- define "lychgate.xdsTlsDir" -}}/etc/lychgate/xds-tls{{- end -}}
{{- define "lychgate.xdsTlsSecret" -}}lychgate-xds-cert{{- end -}}
