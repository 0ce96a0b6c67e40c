#!/usr/bin/env bash
# Fails when generated files are stale, Go code is not gofmt-formatted, or
# go vet reports a problem. Generation runs in a copy of the tree so the
# working tree is never modified.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"

status=0

unformatted=$(gofmt -l $(git ls-files '*.go') 2>/dev/null || true)
if [[ -n "${unformatted}" ]]; then
  echo "gofmt needed on:" ${unformatted}
  status=1
fi

TMP=$(mktemp -d)
trap 'rm -rf "${TMP}"' EXIT
# Copy the tracked and untracked-but-not-ignored files, then regenerate there.
git ls-files --cached --others --exclude-standard -z | xargs -0 -I{} cp --parents {} "${TMP}/"
(cd "${TMP}" && CONTROLLER_GEN="${CONTROLLER_GEN:-${ROOT}/bin/controller-gen}" GOBIN="${ROOT}/bin" hack/update-codegen.sh >/dev/null)
for dir in apis pkg/generated manifests/crds manifests/volcano manifests/charts/muster/crds manifests/charts/muster/files; do
  if ! diff -r "${ROOT}/${dir}" "${TMP}/${dir}" >/dev/null; then
    echo "generated files under ${dir} are stale; run 'make generate':"
    diff -r "${ROOT}/${dir}" "${TMP}/${dir}" | head -20
    status=1
  fi
done

if ! go vet ./...; then
  status=1
fi
# The bench's comparator is a module of its own (comparators/go.mod).
if ! (cd comparators && go vet ./...); then
  status=1
fi
exit ${status}
