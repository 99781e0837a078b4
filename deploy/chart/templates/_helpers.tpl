{{/* The chart name, or nameOverride. */}}
{{- define "ksm-adapter.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name: the Deployment's name, which is also the adapter's identity (`--adapter-name`,
the SMP's spec.adapter.name) and the prefix of every namespaced object.
*/}}
{{- define "ksm-adapter.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Name of the cluster-scoped RBAC objects: unique per release namespace. */}}
{{- define "ksm-adapter.clusterRoleName" -}}
{{- printf "%s-%s" (include "ksm-adapter.fullname" .) .Release.Namespace | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "ksm-adapter.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "ksm-adapter.labels" -}}
helm.sh/chart: {{ include "ksm-adapter.chart" . }}
{{ include "ksm-adapter.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: k0rdent
{{- end }}

{{/* Labels selecting the adapter's pods. */}}
{{- define "ksm-adapter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ksm-adapter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "ksm-adapter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ksm-adapter.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* repository:tag, or repository@digest. */}}
{{- define "ksm-adapter.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The SMP's ServiceSet selector. */}}
{{- define "ksm-adapter.smpSelector" -}}
{{- if .Values.smp.selector -}}
{{ toYaml .Values.smp.selector }}
{{- else -}}
matchLabels:
  ksm.k0rdent.mirantis.com/adapter: {{ .Release.Name | quote }}
{{- end -}}
{{- end }}
