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

{{/*
Sharding (sharding.shards > 1). Each takes (dict "root" $ "shard" <index>).
The name of a shard's Deployment and Lease: the full name for shard 0, `<fullname>-shard-<i>`.
*/}}
{{- define "ksm-adapter.shardName" -}}
{{- $fullname := include "ksm-adapter.fullname" .root }}
{{- if eq (int .shard) 0 }}
{{- $fullname }}
{{- else }}
{{- $suffix := printf "-shard-%d" (int .shard) }}
{{- printf "%s%s" ($fullname | trunc (int (sub 63 (len $suffix))) | trimSuffix "-") $suffix }}
{{- end }}
{{- end }}

{{/* The label of a shard's Deployment and pods (not of ServiceSets): its index. */}}
{{- define "ksm-adapter.shardLabel" -}}
ksm.k0rdent.mirantis.com/shard: {{ .shard | toString | quote }}
{{- end }}

{{/*
A shard's --shard-selector over the ServiceSet label sharding.labelKey. Shard i > 0 serves
`<key>=shard-<i>`; shard 0 serves every other ServiceSet, `<key> notin (shard-1,...,shard-<N-1>)`,
unlabelled ones and unknown values included. So every ServiceSet is served by exactly one shard.
*/}}
{{- define "ksm-adapter.shardSelector" -}}
{{- $key := .root.Values.sharding.labelKey }}
{{- if eq (int .shard) 0 }}
{{- $others := list }}
{{- range $i := untilStep 1 (int .root.Values.sharding.shards) 1 }}
{{- $others = append $others (printf "shard-%d" $i) }}
{{- end }}
{{- printf "%s notin (%s)" $key (join "," $others) }}
{{- else }}
{{- printf "%s=shard-%d" $key (int .shard) }}
{{- end }}
{{- end }}
