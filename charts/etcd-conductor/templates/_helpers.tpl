{{/*
Chart name, overridable; truncated because some Kubernetes name fields are limited to 63 characters.
*/}}
{{- define "etcd-conductor.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name for namespaced and cluster-scoped objects. A release already named after the chart
is not repeated, so `helm install etcd-conductor` gives "etcd-conductor", not a doubled name.
*/}}
{{- define "etcd-conductor.fullname" -}}
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

{{- define "etcd-conductor.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Selector labels never change after install: a Deployment's selector is immutable.
*/}}
{{- define "etcd-conductor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "etcd-conductor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "etcd-conductor.labels" -}}
helm.sh/chart: {{ include "etcd-conductor.chart" . }}
{{ include "etcd-conductor.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "etcd-conductor.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
Where the operator-wide member client key pair is mounted; config.yaml points at files below it.
*/}}
{{- define "etcd-conductor.memberClientTLSDir" -}}
/etc/etcd-conductor/member-client-tls
{{- end }}

{{/*
Where the metrics serving certificate is mounted; config.yaml's metricsCertDir points here.
*/}}
{{- define "etcd-conductor.metricsTLSDir" -}}
/etc/etcd-conductor/metrics-tls
{{- end }}

{{/*
The OperatorConfiguration the manager decodes strictly (internal/api/config/v1alpha1): every key
written here must exist there, or the manager refuses to start.
*/}}
{{/*
memberReportPolicyName names the member report ValidatingAdmissionPolicy and its binding; the
operator is told it (memberReports.admissionPolicy) and checks both are installed.
*/}}
{{- define "etcd-conductor.memberReportPolicyName" -}}
{{- printf "%s-member-report" (include "etcd-conductor.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "etcd-conductor.operatorConfig" -}}
apiVersion: config.druid.gardener.cloud/v1alpha1
kind: OperatorConfiguration
leaderElection:
  enabled: {{ .Values.leaderElection.enabled }}
  resourceNamespace: {{ .Release.Namespace }}
  resourceName: {{ include "etcd-conductor.fullname" . }}-leader-election
clientConnection:
  qps: {{ .Values.clientConnection.qps }}
  burst: {{ .Values.clientConnection.burst }}
controllers:
  etcd:
    concurrentSyncs: {{ .Values.controllers.etcd.concurrentSyncs }}
    waitForBackupReady: {{ .Values.controllers.etcd.waitForBackupReady }}
  etcdCopyBackupsTask:
    enabled: {{ .Values.controllers.etcdCopyBackupsTask.enabled }}
    concurrentSyncs: {{ .Values.controllers.etcdCopyBackupsTask.concurrentSyncs }}
  ondelete:
    concurrentSyncs: {{ .Values.controllers.ondelete.concurrentSyncs }}
    memberRoleSource: {{ .Values.controllers.ondelete.memberRoleSource }}
    {{- with .Values.controllers.ondelete.handover }}
    handover:
      enabled: {{ .enabled }}
      timeout: {{ .timeout | quote }}
      maxAttempts: {{ .maxAttempts }}
    {{- end }}
    maxAppliedIndexLag: {{ .Values.controllers.ondelete.maxAppliedIndexLag }}
    maxConcurrentMemberUpdates: {{ .Values.controllers.ondelete.maxConcurrentMemberUpdates }}
    rejoinByRead: {{ .Values.controllers.ondelete.rejoinByRead }}
{{- with .Values.backupStores }}
{{- if or .localRoots .endpoints .allowInsecureEndpoints .maxCopyObjectBytes }}
backupStores:
  {{- with .localRoots }}
  localRoots:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .endpoints }}
  endpoints:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if .allowInsecureEndpoints }}
  allowInsecureEndpoints: true
  {{- end }}
  {{- if .maxCopyObjectBytes }}
  maxCopyObjectBytes: {{ int64 .maxCopyObjectBytes }}
  {{- end }}
{{- end }}
{{- end }}
{{- with .Values.memberNetworkPolicy }}
{{- if .enabled }}
memberNetworkPolicy:
  enabled: true
  {{- with .clientFrom }}
  clientFrom:
    {{- toYaml . | nindent 4 }}
    # The operator talks to every member.
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: {{ $.Release.Namespace }}
      podSelector:
        matchLabels:
          {{- include "etcd-conductor.selectorLabels" $ | nindent 10 }}
  {{- end }}
  {{- with .metricsFrom }}
  metricsFrom:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end }}
{{- with .Values.watchNamespaces }}
watchNamespaces:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.featureGates }}
featureGates:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if .Values.memberClientTLS.secretName }}
{{- $dir := include "etcd-conductor.memberClientTLSDir" . }}
memberClientTLS:
  caFile: {{ $dir }}/ca.crt
  certFile: {{ $dir }}/tls.crt
  keyFile: {{ $dir }}/tls.key
{{- end }}
memberReports:
  {{- if .Values.memberReportPolicy.enabled }}
  admissionPolicy: {{ include "etcd-conductor.memberReportPolicyName" . }}
  {{- end }}
  trustUnauthenticated: {{ .Values.memberReportPolicy.trustUnauthenticated }}
metricsBindAddress: ":8443"
{{- if .Values.metrics.tls.secretName }}
metricsCertDir: {{ include "etcd-conductor.metricsTLSDir" . }}
{{- end }}
healthProbeBindAddress: ":8081"
logging:
  logLevel: {{ .Values.logLevel }}
  logFormat: {{ .Values.logFormat }}
{{- end }}

{{/*
kubeVersionBelow is "true" when the Kubernetes version Helm renders for is known and below the
version given (e.g. "1.32"). Helm renders for v1.20.0 when it has neither a cluster nor
--kube-version and was built without its release ldflags (as `go install` builds it): that is a
placeholder, not a cluster, so `helm template` without a cluster renders every object instead of
refusing. A real 1.20 cluster still refuses at install: it serves no ValidatingAdmissionPolicy.
*/}}
{{- define "etcd-conductor.kubeVersionBelow" -}}
{{- $v := .context.Capabilities.KubeVersion.Version -}}
{{- if and (ne $v "v1.20.0") (semverCompare (printf "<%s-0" .version) $v) -}}
true
{{- end -}}
{{- end }}
