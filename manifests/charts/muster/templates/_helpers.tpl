{{/* The release's full name: names every object of the release. */}}
{{- define "muster.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "muster.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: scheduler
{{- end -}}

{{- define "muster.labels" -}}
{{ include "muster.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "muster.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "muster.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The profile name Muster serves. */}}
{{- define "muster.schedulerName" -}}
{{- if eq .Values.mode "replace-default" -}}
default-scheduler
{{- else -}}
{{- default "muster-scheduler" .Values.schedulerName -}}
{{- end -}}
{{- end -}}

{{/* The scheduler's lease: namespace, then name. */}}
{{- define "muster.leaseNamespace" -}}
{{- if .Values.leaderElection.resourceNamespace -}}
{{- .Values.leaderElection.resourceNamespace -}}
{{- else if eq .Values.mode "replace-default" -}}
kube-system
{{- else -}}
{{- .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{- define "muster.leaseName" -}}
{{- if .Values.leaderElection.resourceName -}}
{{- .Values.leaderElection.resourceName -}}
{{- else if eq .Values.mode "replace-default" -}}
kube-scheduler
{{- else -}}
{{- include "muster.schedulerName" . -}}
{{- end -}}
{{- end -}}

{{- define "muster.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* Checks across values that the schema cannot say clearly. */}}
{{- define "muster.validate" -}}
{{- $v := .Values -}}
{{- if and (eq $v.mode "replace-default") $v.schedulerName (ne $v.schedulerName "default-scheduler") -}}
{{- fail (printf "schedulerName %q: in mode replace-default the profile is always default-scheduler; use mode second-scheduler for a scheduler of another name" $v.schedulerName) -}}
{{- end -}}
{{- if and (eq $v.mode "second-scheduler") (eq $v.schedulerName "default-scheduler") -}}
{{- fail "schedulerName default-scheduler is mode replace-default" -}}
{{- end -}}
{{- if and (ne $v.plugins.queue.policy "None") (not $v.plugins.gang.enabled) -}}
{{- fail (printf "plugins.queue.policy %s needs plugins.gang.enabled: queues admit and order gangs" $v.plugins.queue.policy) -}}
{{- end -}}
{{- if and (gt (int $v.replicas) 1) (not $v.leaderElection.enabled) -}}
{{- fail (printf "replicas %d with leaderElection.enabled false would run %d schedulers deciding at once" (int $v.replicas) (int $v.replicas)) -}}
{{- end -}}
{{- if and (not $v.plugins.gang.enabled) (eq $v.plugins.queue.policy "None") (not $v.plugins.binpack.enabled) -}}
{{- fail "no Muster plugin is enabled (plugins.gang, plugins.queue, plugins.binpack): this would be plain kube-scheduler" -}}
{{- end -}}
{{- if and $v.volcanoProfile (eq (include "muster.schedulerName" .) "volcano") -}}
{{- fail "schedulerName volcano with volcanoProfile true would serve the profile volcano twice: set one of them" -}}
{{- end -}}
{{- range $v.additionalProfiles -}}
{{- if eq .schedulerName (include "muster.schedulerName" $) -}}
{{- fail (printf "additionalProfiles: schedulerName %q is the chart's own profile" .schedulerName) -}}
{{- end -}}
{{- if and $v.volcanoProfile (eq .schedulerName "volcano") -}}
{{- fail "additionalProfiles: schedulerName \"volcano\" is the chart's volcano profile (volcanoProfile true)" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The scheduler's own profile, named .name: Muster's plugins from the
values of .root. The volcano profile is the same profile under another
name: kube-scheduler requires every profile's QueueSort (Gang) and its args
to be the same. */}}
{{- define "muster.profile" -}}
{{- $p := .root.Values.plugins -}}
{{- $queue := ne $p.queue.policy "None" -}}
{{- $enabled := list -}}
{{- $postFilter := list -}}
{{- if $queue -}}
{{- $enabled = append $enabled (dict "name" $p.queue.policy) -}}
{{- $postFilter = append $postFilter (dict "name" $p.queue.policy) -}}
{{- end -}}
{{- if $p.gang.enabled -}}
{{- $enabled = append $enabled (dict "name" "Gang") -}}
{{- $postFilter = append $postFilter (dict "name" "Gang") -}}
{{- end -}}
{{- if $p.binpack.enabled -}}
{{- $enabled = append $enabled (dict "name" "Binpack" "weight" $p.binpack.weight) -}}
{{- end -}}
{{- $multiPoint := dict "enabled" $enabled -}}
{{- if $p.gang.enabled -}}
{{- $_ := set $multiPoint "disabled" (list (dict "name" "PrioritySort")) -}}
{{- end -}}
{{- $plugins := dict "multiPoint" $multiPoint -}}
{{- if $postFilter -}}
{{- $_ := set $plugins "postFilter" (dict "enabled" $postFilter) -}}
{{- end -}}
{{- if and $p.binpack.enabled $p.binpack.disableSpreadingScores -}}
{{- $_ := set $plugins "score" (dict "disabled" (list (dict "name" "NodeResourcesFit") (dict "name" "NodeResourcesBalancedAllocation"))) -}}
{{- end -}}
{{- $args := list -}}
{{- if $p.gang.enabled -}}
{{- $gangArgs := dict "defaultScheduleTimeoutSeconds" $p.gang.defaultScheduleTimeoutSeconds "planStepMilliseconds" $p.gang.planStepMilliseconds -}}
{{- if $p.gang.topologyLevels -}}
{{- $_ := set $gangArgs "topologyLevels" $p.gang.topologyLevels -}}
{{- end -}}
{{- $args = append $args (dict "name" "Gang" "args" $gangArgs) -}}
{{- end -}}
{{- if $queue -}}
{{- $args = append $args (dict "name" $p.queue.policy "args" (dict "overcommitFactor" $p.queue.overcommitFactor "drfPreemption" $p.queue.drfPreemption "auditIntervalSeconds" $p.queue.auditIntervalSeconds)) -}}
{{- end -}}
{{- if $p.binpack.enabled -}}
{{- $binpackArgs := dict "resources" $p.binpack.resources -}}
{{- if $p.binpack.domainLevels -}}
{{- $_ := set $binpackArgs "domainLevels" $p.binpack.domainLevels -}}
{{- end -}}
{{- $args = append $args (dict "name" "Binpack" "args" $binpackArgs) -}}
{{- end -}}
{{- $profile := dict "schedulerName" .name "plugins" $plugins -}}
{{- if $args -}}
{{- $_ := set $profile "pluginConfig" $args -}}
{{- end -}}
{{- toYaml $profile -}}
{{- end -}}

{{/* The KubeSchedulerConfiguration the scheduler runs with. */}}
{{- define "muster.schedulerConfig" -}}
{{- $le := .Values.leaderElection -}}
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  qps: {{ .Values.clientConnection.qps }}
  burst: {{ .Values.clientConnection.burst }}
leaderElection:
  leaderElect: {{ $le.enabled }}
  resourceLock: leases
  resourceNamespace: {{ include "muster.leaseNamespace" . }}
  resourceName: {{ include "muster.leaseName" . }}
  leaseDuration: {{ $le.leaseDuration }}
  renewDeadline: {{ $le.renewDeadline }}
  retryPeriod: {{ $le.retryPeriod }}
profiles:
- {{ include "muster.profile" (dict "root" . "name" (include "muster.schedulerName" .)) | nindent 2 | trim }}
{{- if .Values.volcanoProfile }}
- {{ include "muster.profile" (dict "root" . "name" "volcano") | nindent 2 | trim }}
{{- end }}
{{- with .Values.additionalProfiles }}
{{ toYaml . }}
{{- end }}
{{- end -}}
