{{/*
The chart name, or nameOverride.
*/}}
{{- define "vllm-normalizer.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object name: fullnameOverride, or the release name with the
chart name (once, if the release name already holds it). 63 characters at most,
the DNS label limit of Kubernetes names.
*/}}
{{- define "vllm-normalizer.fullname" -}}
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

{{/*
Chart name and version, for the helm.sh/chart label.
*/}}
{{- define "vllm-normalizer.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The namespace of the namespaced objects.
*/}}
{{- define "vllm-normalizer.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Selector labels: what identifies this release's objects.
*/}}
{{- define "vllm-normalizer.selectorLabels" -}}
app.kubernetes.io/name: {{ include "vllm-normalizer.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Labels of every object.
*/}}
{{- define "vllm-normalizer.labels" -}}
helm.sh/chart: {{ include "vllm-normalizer.chart" . }}
{{ include "vllm-normalizer.selectorLabels" . }}
{{- with .Chart.AppVersion }}
app.kubernetes.io/version: {{ . | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: vllm-normalizer
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The sidecar image reference.
*/}}
{{- define "vllm-normalizer.image" -}}
{{- $repo := .Values.image.repository }}
{{- with .Values.image.registry }}{{ $repo = printf "%s/%s" . $repo }}{{ end }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $repo .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
The sidecar container, as JSON: the kustomize Component's container
(files/sidecar.yaml, a copy of deploy/components/sidecar/sidecar.yaml kept
equal by a test) with the chart's image and a target's overrides. Called with
(dict "root" $ "target" $target).
*/}}
{{- define "vllm-normalizer.sidecarContainer" -}}
{{- $root := .root }}
{{- $container := dict }}
{{- range ($root.Files.Get "files/sidecar.yaml" | fromYamlArray) }}
{{- if and (eq .op "add") (hasSuffix "/containers/-" .path) }}
{{- $container = deepCopy .value }}
{{- end }}
{{- end }}
{{- if not $container.name }}
{{- fail "files/sidecar.yaml holds no JSON patch adding a container at .../containers/-: regenerate the chart's files (go test ./deploy -run TestHelmChartFilesMatchSources -update)" }}
{{- end }}
{{- $_ := set $container "image" (include "vllm-normalizer.image" $root) }}
{{- with $root.Values.image.pullPolicy }}{{ $_ := set $container "imagePullPolicy" . }}{{ end }}
{{- $args := list }}
{{- range $container.args }}
{{- if and $.target.scrapeURI (hasPrefix "--vllm.scrape-uri=" .) }}
{{- $args = append $args (printf "--vllm.scrape-uri=%s" $.target.scrapeURI) }}
{{- else }}
{{- $args = append $args . }}
{{- end }}
{{- end }}
{{- $_ := set $container "args" (concat $args $root.Values.injection.extraArgs) }}
{{- with $root.Values.injection.resources }}{{ $_ := set $container "resources" . }}{{ end }}
{{- toJson $container }}
{{- end }}

{{/*
A CEL literal of a value, for a MutatingAdmissionPolicy expression. Objects
become typed object constructions named by their field path from Object
(Object.spec.containers{...}, Object.spec.containers.env{...}), as the
admission plugin requires; maps whose keys are not CEL identifiers become map
literals; scalars are JSON, which is valid CEL for strings, numbers, booleans
and null. Called with (dict "type" "Object.spec.containers" "value" $v).
*/}}
{{- define "vllm-normalizer.cel" -}}
{{- $type := .type }}
{{- $v := .value }}
{{- if kindIs "map" $v }}
{{- $identifiers := true }}
{{- range $k, $_ := $v }}{{ if not (regexMatch "^[a-zA-Z_][a-zA-Z0-9_]*$" $k) }}{{ $identifiers = false }}{{ end }}{{ end }}
{{- $fields := list }}
{{- range $k := keys $v | sortAlpha }}
{{- $inner := include "vllm-normalizer.cel" (dict "type" (printf "%s.%s" $type $k) "value" (get $v $k)) }}
{{- if $identifiers }}
{{- $fields = append $fields (printf "%s: %s" $k $inner) }}
{{- else }}
{{- $fields = append $fields (printf "%s: %s" (toJson $k) $inner) }}
{{- end }}
{{- end }}
{{- if $identifiers }}{{ $type }}{{ end }}{{ printf "{%s}" (join ", " $fields) }}
{{- else if kindIs "slice" $v }}
{{- $items := list }}
{{- range $v }}
{{- $items = append $items (include "vllm-normalizer.cel" (dict "type" $type "value" .)) }}
{{- end }}
{{- printf "[%s]" (join ", " $items) }}
{{- else }}
{{- toJson $v }}
{{- end }}
{{- end }}

{{/*
The admissionregistration.k8s.io version of the injection objects.
*/}}
{{- define "vllm-normalizer.admissionAPIVersion" -}}
{{- $v := .Values.injection.apiVersion }}
{{- if not $v }}
{{- if .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy" }}
{{- $v = "v1" }}
{{- else if .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1beta1/MutatingAdmissionPolicy" }}
{{- $v = "v1beta1" }}
{{- else if semverCompare ">=1.36.0-0" .Capabilities.KubeVersion.Version }}
{{- /* helm template without a cluster knows versions, not kinds: v1 is GA and on from 1.36 */}}
{{- $v = "v1" }}
{{- else }}
{{- fail "injection.enabled: this cluster serves no MutatingAdmissionPolicy API (admissionregistration.k8s.io/v1 from Kubernetes 1.36, v1beta1 in 1.34-1.35 when enabled); set injection.enabled=false and add the sidecar through your controller's values (docs/deploy.md), or set injection.apiVersion" }}
{{- end }}
{{- end }}
{{- printf "admissionregistration.k8s.io/%s" $v }}
{{- end }}
