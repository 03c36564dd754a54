// Package deploy holds the checks of the deployment files beside it: the
// Helm chart (helm/ipledger) rendered with Helm's Go packages and decoded
// strictly into the Kubernetes API types, the systemd unit
// (systemd/ipledger.service) verified by systemd-analyze, and the
// Prometheus rules (prometheus/ipledger-rules.yaml) parsed with
// Prometheus's own parser. It is a module of its own so that Helm and the
// Kubernetes API types stay out of the server's dependencies;
// `cd deploy && go test ./...` runs the checks (.ci/run does).
package deploy
