{{/*
Name helpers of the fleetgate chart. One release per namespace, so object names start with the
release name and cluster-scoped objects carry the namespace.
*/}}

{{/* The chart name, for app.kubernetes.io/name. */}}
{{- define "fleetgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every namespaced object: the release name unless overridden. */}}
{{- define "fleetgate.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- end }}

{{/* The controller's Deployment, Service, ServiceAccount and Role name. */}}
{{- define "fleetgate.controllerName" -}}
{{- printf "%s-controller" (include "fleetgate.fullname" .) }}
{{- end }}

{{/* The ServiceAccount the controller runs as. */}}
{{- define "fleetgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "fleetgate.controllerName" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The cluster-scoped webhook configuration: one per namespace. */}}
{{- define "fleetgate.webhookName" -}}
{{- printf "fleetgate-%s" .Release.Namespace | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The Secret with the gates' report bearer token (key `token`). */}}
{{- define "fleetgate.reportTokenSecret" -}}
{{- printf "%s-report-token" (include "fleetgate.fullname" .) }}
{{- end }}

{{/* The Secret with the webhook's serving certificate (tls.crt, tls.key, ca.crt). */}}
{{- define "fleetgate.webhookTLSSecret" -}}
{{- printf "%s-webhook-tls" (include "fleetgate.fullname" .) }}
{{- end }}

{{/* The webhook Service's in-cluster DNS name. */}}
{{- define "fleetgate.webhookHost" -}}
{{- printf "%s.%s.svc" (include "fleetgate.controllerName" .) .Release.Namespace }}
{{- end }}

{{/* An image reference: repository and tag (default the chart's appVersion). */}}
{{- define "fleetgate.image" -}}
{{- printf "%s:%s" .image.repository (default .chart.AppVersion .image.tag) }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "fleetgate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "fleetgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: fleetgate
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels of the controller pod. */}}
{{- define "fleetgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fleetgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end }}

{{/* The cluster-scoped ValidatingAdmissionPolicy and its binding: one per namespace. */}}
{{- define "fleetgate.admissionPolicyName" -}}
{{- printf "fleetgate-injected-%s" .Release.Namespace | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- /*
The admission policy's offending fields of one rule, as a CEL list of strings: every container,
init container and ephemeral container for which `cond` (CEL over `c`) holds, each named by
`field` (CEL string over `@AT@`, the container's path such as `spec.containers[1]`). `exempt`:
`init` spares the gate's own init container, `gate` also the gate container (both by name and
gate image, `gateImage`, CEL over `c`). The same rules as controller/src/webhook/identity.rs.
*/}}
{{- define "fleetgate.admission.fields" -}}
{{- $lists := list (list "containers" (eq .exempt "gate") "fleetgate-proxy") (list "initContainers" true "fleetgate-init") (list "ephemeralContainers" false "") -}}
{{- $parts := list -}}
{{- range $lists -}}
{{- $l := printf "object.spec.%s" (index . 0) -}}
{{- $at := printf "('spec.%s[' + string(%s.map(x, x.name).indexOf(c.name)) + ']')" (index . 0) $l -}}
{{- $keep := $.cond -}}
{{- if index . 1 -}}
{{- $keep = printf "!(c.name == '%s' && %s) && (%s)" (index . 2) $.gateImage $.cond -}}
{{- end -}}
{{- $expr := printf "%s.filter(c, %s).map(c, %s)" $l $keep (replace "@AT@" $at $.field) -}}
{{- if ne (index . 0) "containers" -}}
{{- $expr = printf "(has(%s) ? %s : [])" $l $expr -}}
{{- end -}}
{{- $parts = append $parts $expr -}}
{{- end -}}
{{- join " + " $parts -}}
{{- end }}
