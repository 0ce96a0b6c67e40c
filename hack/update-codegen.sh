#!/usr/bin/env bash
# Regenerates every generated file: deepcopy, defaulters and conversions of
# the APIs, the typed clientset/listers/informers, and the CRD manifests.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"
MODULE=github.com/muster-sched/muster
BOILERPLATE=hack/boilerplate.go.txt
CONTROLLER_GEN=${CONTROLLER_GEN:-${ROOT}/bin/controller-gen}

# kube_codegen.sh installs its generators into GOBIN: keep them in ./bin.
export GOBIN="${ROOT}/bin"
# `go list -m` does not download: on a fresh module cache, fetch first.
go mod download k8s.io/code-generator
CODEGEN_PKG=$(go list -m -f '{{.Dir}}' k8s.io/code-generator)
source "${CODEGEN_PKG}/kube_codegen.sh"

# Plugin args: deepcopy, defaulters and conversions between internal and v1.
kube::codegen::gen_helpers \
  --boilerplate "${BOILERPLATE}" \
  --extra-peer-dir k8s.io/kubernetes/pkg/scheduler/apis/config/v1 \
  --extra-peer-dir k8s.io/kube-scheduler/config/v1 \
  "${ROOT}/apis/config"

# CRD types: deepcopy and CRD manifests from controller-gen.
"${CONTROLLER_GEN}" object:headerFile="${BOILERPLATE}" paths=./apis/scheduling/...
rm -f manifests/crds/*.yaml
"${CONTROLLER_GEN}" crd:crdVersions=v1 paths=./apis/scheduling/... output:crd:artifacts:config=manifests/crds
# Bound every resource quantity to 64 characters. CEL's cost estimate of the
# Queue rules that compare quantities scales with the longest string a value
# may hold; unbounded, the apiserver refuses the rules. controller-gen has no
# marker for the values of a map, hence this edit.
sed -i 's/^\( *\)\(pattern: ^(\\+|-)?\)/\1maxLength: 64\n\1\2/' manifests/crds/*.yaml
# The Helm chart ships the same CRDs: a chart's crds/ cannot point elsewhere.
rm -f manifests/charts/muster/crds/*.yaml
cp manifests/crds/*.yaml manifests/charts/muster/crds/
cp manifests/scheduler-plugins/scheduling.x-k8s.io_podgroups.yaml manifests/charts/muster/files/
# Volcano's PodGroup and Queue CRDs, generated from the types of its
# published API module as Volcano generates them: tests install them, and
# so may clusters that run Muster without Volcano's own charts.
rm -f manifests/volcano/*.yaml
"${CONTROLLER_GEN}" crd:crdVersions=v1 paths=volcano.sh/apis/pkg/apis/scheduling/v1beta1 output:crd:artifacts:config=manifests/volcano

# Typed clientset, listers and informers.
kube::codegen::gen_client \
  --with-watch \
  --output-dir "${ROOT}/pkg/generated" \
  --output-pkg "${MODULE}/pkg/generated" \
  --boilerplate "${BOILERPLATE}" \
  "${ROOT}/apis"
