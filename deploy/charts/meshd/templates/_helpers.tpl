{{/* The name of every namespaced object of the release. */}}
{{- define "meshd.fullname" -}}
{{- if contains "meshd" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "meshd-%s" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Cluster-scoped names carry the namespace: releases of several meshes never share them. */}}
{{- define "meshd.clusterName" -}}
{{- printf "%s-%s" (include "meshd.fullname" .) .Release.Namespace | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "meshd.revision" -}}
{{- required "revision must not be empty" .Values.revision -}}
{{- end -}}

{{/* What selects this release's Pods: never another revision's. */}}
{{- define "meshd.selectorLabels" -}}
app.kubernetes.io/name: meshd
app.kubernetes.io/instance: {{ .Release.Name }}
meshd.io/revision: {{ include "meshd.revision" . }}
{{- end -}}

{{- define "meshd.labels" -}}
{{ include "meshd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "meshd.webhook" -}}
{{- if .Values.defaultRevisionWebhook -}}
{{- .Values.defaultRevisionWebhook -}}
{{- else if eq .Release.Namespace "istio-system" -}}
istio-revision-tag-default
{{- else -}}
{{- printf "istio-revision-tag-default-%s" .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{/* Shutdown takes at most min(ttl, 10s); five more seconds for the process to exit. */}}
{{- define "meshd.terminationGrace" -}}
{{- add (min (int .Values.ttlSeconds) 10) 5 -}}
{{- end -}}
