{{/* The release's resource name. */}}
{{- define "ipledger.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "ipledger.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "ipledger.labels" -}}
{{ include "ipledger.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The Secret holding the database URL, admin token and OIDC client secret. */}}
{{- define "ipledger.secretName" -}}
{{- .Values.secret.existingSecret | default (include "ipledger.fullname" .) -}}
{{- end -}}

{{- define "ipledger.scheme" -}}
{{- if .Values.tls.enabled }}HTTPS{{ else }}HTTP{{ end -}}
{{- end -}}

{{/*
The combinations the server cannot run: checked before anything renders.
*/}}
{{- define "ipledger.validate" -}}
{{- $db := .Values.database -}}
{{- if not (has $db.type (list "sqlite" "postgres")) -}}
{{- fail (printf "database.type %q: want sqlite or postgres" $db.type) -}}
{{- end -}}
{{- if and (eq $db.type "sqlite") (gt (int .Values.replicaCount) 1) -}}
{{- fail (printf "replicaCount %d with database.type sqlite: a SQLite file belongs to one process; use PostgreSQL (database.type: postgres) for more than one replica" (int .Values.replicaCount)) -}}
{{- end -}}
{{- if and (eq $db.type "sqlite") $db.url -}}
{{- fail "database.url is for PostgreSQL: with database.type sqlite the file lives in the data volume" -}}
{{- end -}}
{{- if and (eq $db.type "postgres") $db.url (not (regexMatch "^postgres(ql)?://" $db.url)) -}}
{{- fail "database.url must start with postgres:// or postgresql:// when database.type is postgres" -}}
{{- end -}}
{{- if and (eq $db.type "postgres") (not $db.url) (not .Values.secret.existingSecret) -}}
{{- fail "database.type postgres needs database.url or secret.existingSecret (with the key secret.databaseURLKey)" -}}
{{- end -}}
{{/* A Secret of one's own replaces the chart's: a secret value given
beside it would be silently unused, so it is refused by name. */}}
{{- $sec := .Values.secret -}}
{{- if $sec.existingSecret -}}
{{- range $v := list (list "database.url" $db.url $sec.databaseURLKey) (list "adminToken" $.Values.adminToken $sec.adminTokenKey) (list "identity.oidc.clientSecret" $.Values.identity.oidc.clientSecret $sec.oidcClientSecretKey) -}}
{{- if index $v 1 -}}
{{- fail (printf "%s is set with secret.existingSecret %q, which replaces the chart's Secret, so the value would be ignored: put it under the key %q of that Secret and leave %s empty" (index $v 0) $sec.existingSecret (index $v 2) (index $v 0)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and .Values.tls.enabled (not .Values.tls.secretName) -}}
{{- fail "tls.enabled needs tls.secretName (a kubernetes.io/tls Secret)" -}}
{{- end -}}
{{- if and .Values.tls.clientCASecret (not .Values.tls.enabled) -}}
{{- fail "tls.clientCASecret needs tls.enabled: client certificates come with HTTPS" -}}
{{- end -}}
{{- if and .Values.identity.authProxy.header (not .Values.identity.authProxy.trusted) -}}
{{- fail "identity.authProxy.header needs identity.authProxy.trusted (the proxy's CIDRs)" -}}
{{- end -}}
{{- $px := .Values.identity.authProxy -}}
{{- if and (not $px.header) (or $px.groupsHeader $px.trusted $px.logoutURL) -}}
{{- fail "identity.authProxy.groupsHeader, .trusted and .logoutURL need identity.authProxy.header" -}}
{{- end -}}
{{- if and $px.logoutURL (not (or (regexMatch "^/[^/\\\\]" $px.logoutURL) (regexMatch "^https?://[^/]+" $px.logoutURL))) -}}
{{- fail (printf "identity.authProxy.logoutURL %q: want a path such as /oauth2/sign_out or an http(s) URL" $px.logoutURL) -}}
{{- end -}}
{{/* The server's own refusals of identity settings, so that a chart that
renders is a pod that starts (not one that crash-loops). */}}
{{- $oidc := .Values.identity.oidc -}}
{{- if and $oidc.issuer (not $oidc.clientID) -}}
{{- fail "identity.oidc.issuer needs identity.oidc.clientID" -}}
{{- end -}}
{{- if and $oidc.issuer (not .Values.identity.externalURL) -}}
{{- fail "identity.oidc.issuer needs identity.externalURL: the redirect URI is EXTERNAL_URL/auth/oidc/callback" -}}
{{- end -}}
{{- if and (not $oidc.issuer) (or $oidc.clientID $oidc.clientSecret) -}}
{{- fail "identity.oidc.clientID and .clientSecret need identity.oidc.issuer" -}}
{{- end -}}
{{- if and (eq (toString .Values.identity.tokenLogin) "false") (not $oidc.issuer) -}}
{{- fail "identity.tokenLogin false leaves the console without a way to sign in: set identity.oidc.issuer too" -}}
{{- end -}}
{{- if and .Values.tls.clientRoles (not .Values.tls.clientCASecret) -}}
{{- fail "tls.clientRoles needs tls.clientCASecret: roles are given to certificates that CA signed" -}}
{{- end -}}
{{- include "ipledger.validatePDB" . -}}
{{- end -}}

{{/*
A disruption budget that lets no pod go blocks every node drain (kubectl
drain waits forever): maxUnavailable 0, or minAvailable reaching
replicaCount (a percentage rounds up, as Kubernetes rounds it).
*/}}
{{- define "ipledger.validatePDB" -}}
{{- $pdb := .Values.podDisruptionBudget -}}
{{- $n := int .Values.replicaCount -}}
{{- if $pdb.enabled -}}
{{- $min := toString $pdb.minAvailable -}}
{{- if ne $min "" -}}
{{- $need := 0 -}}
{{- if hasSuffix "%" $min -}}
{{- $need = int (ceil (divf (mulf (atoi (trimSuffix "%" $min)) $n) 100)) -}}
{{- else -}}
{{- $need = atoi $min -}}
{{- end -}}
{{- if ge $need $n -}}
{{- fail (printf "podDisruptionBudget.minAvailable %s with replicaCount %d lets no pod be evicted, so every node drain would wait forever: keep it below replicaCount (or set podDisruptionBudget.enabled false)" $min $n) -}}
{{- end -}}
{{- else if has (toString $pdb.maxUnavailable) (list "0" "0%") -}}
{{- fail (printf "podDisruptionBudget.maxUnavailable %v lets no pod be evicted, so every node drain would wait forever: use 1 (the default) or more (or set podDisruptionBudget.enabled false)" $pdb.maxUnavailable) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* One environment variable when its value is set. */}}
{{- define "ipledger.env" -}}
{{- if .value }}
- name: {{ .name }}
  value: {{ .value | toString | quote }}
{{- end }}
{{- end -}}

{{/*
GOMEMLIMIT: settings.goMemLimit when set, else two thirds of the
container's memory limit (the rest is what Go does not count: SQLite's
page caches, the stacks), so that the collector works harder well before
the kernel kills the pod; without a memory limit, nothing (the server's
own default, 170MiB). The IpledgerMemoryHigh alert fires at 1.25 times
it, 83% of the limit.
*/}}
{{- define "ipledger.goMemLimit" -}}
{{- $mem := toString (dig "limits" "memory" "" (.Values.resources | default dict)) -}}
{{- if .Values.settings.goMemLimit -}}
{{- .Values.settings.goMemLimit -}}
{{- else if $mem -}}
{{- $units := dict "" 1 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 -}}
{{- $unit := regexReplaceAll "^[0-9]+" $mem "" -}}
{{- if not (and (regexMatch "^[0-9]+[A-Za-z]*$" $mem) (hasKey $units $unit)) -}}
{{- fail (printf "resources.limits.memory %q: GOMEMLIMIT is derived from it, so write it as a whole number with k, M, G, T, Ki, Mi, Gi or Ti, or set settings.goMemLimit" $mem) -}}
{{- end -}}
{{- printf "%dMiB" (div (mul (atoi (trimSuffix $unit $mem)) (get $units $unit) 2) (mul 3 1048576)) -}}
{{- end -}}
{{- end -}}
