#!/usr/bin/env bash
# Builds the e2e tools into e2e/bin from the pinned Go modules under e2e/tools/ (see docs/e2e.md).
# A tool is rebuilt only when it is missing or older than its module's go.mod/go.sum/sources; Go's own
# caches ($(go env GOMODCACHE), $(go env GOCACHE)) keep the rest. Nothing but the Go module proxy is used.
#
#   e2e/build.sh            build whatever is missing
#   e2e/build.sh kube pulumi build (or refresh) only these groups: kube kwok pulumi provider actionlint
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
bin="$here/bin"
tools="$here/tools"
mkdir -p "$bin"

if ! command -v go >/dev/null 2>&1; then
    if [ -x /usr/local/go/bin/go ]; then export PATH="$PATH:/usr/local/go/bin"; else
        echo "e2e/build.sh: needs Go (go1.26 or newer) on PATH or at /usr/local/go" >&2; exit 2; fi
fi

# Release builds of all four projects use cgo off; -trimpath and -s -w keep the binaries small and
# reproducible. GOFLAGS=-mod=readonly: go.mod and go.sum are the pins, a build never edits them.
export CGO_ENABLED=0 GOFLAGS=-mod=readonly GOTOOLCHAIN=local
GOBUILD=(nice -n 10 go build -trimpath)

# Versions: the single place besides the go.mod files (build.sh checks they agree).
K8S_VERSION=v1.36.3
PULUMI_VERSION=v3.274.1
PROVIDER_VERSION=v4.25.0                                   # the release whose commit this pseudo-version is:
PROVIDER_MODULE_VERSION=v4.0.0-20260115033456-f47bc2d6f199
KWOK_VERSION=v0.8.0
ACTIONLINT_VERSION=v1.7.12

mod_version() { # module dir, module path -> the version go.mod requires
    (cd "$tools/$1" && go list -m -f '{{.Version}}' "$2")
}

moddir() { # module dir, module path -> where the module's source lies in the module cache (downloads it)
    (cd "$tools/$1" && go mod download -json "$2" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
}

check_pin() { # module dir, module path, expected version
    local got
    got="$(mod_version "$1" "$2")"
    if [ "$got" != "$3" ]; then
        echo "e2e/build.sh: e2e/tools/$1/go.mod pins $2 $got, build.sh expects $3" >&2; exit 2
    fi
}

fresh() { # output binary, module dir: true when the binary is newer than every input of its module
    local out="$bin/$1" dir="$tools/$2"
    [ -x "$out" ] || return 1
    [ -z "$(find "$dir" "$here/build.sh" -newer "$out" -type f -print -quit)" ]
}

step() { printf 'e2e/build.sh: %s\n' "$*" >&2; }

build_kube() {
    check_pin kube k8s.io/kubernetes "$K8S_VERSION"
    local names=(kube-apiserver kube-controller-manager kube-scheduler etcd) n stale=
    for n in "${names[@]}"; do fresh "$n" kube || stale=1; done
    [ -n "$stale" ] || return 0
    local minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
    local ld="-s -w"
    # Without these the servers report v0.0.0-master and clients fall back to old behaviour.
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ld+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
        ld+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
    done
    step "kube-apiserver, kube-controller-manager, kube-scheduler $K8S_VERSION"
    (cd "$tools/kube" && "${GOBUILD[@]}" -ldflags "$ld" -o "$bin/" k8s.io/kubernetes/cmd/kube-apiserver \
        k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler)
    # etcd's version is a constant of its api module; the one k8s.io/kubernetes itself requires.
    step "etcd $(mod_version kube go.etcd.io/etcd/server/v3)"
    (cd "$tools/kube" && "${GOBUILD[@]}" -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3)
    for n in "${names[@]}"; do touch "$bin/$n"; done
}

build_kwok() {
    check_pin kwok sigs.k8s.io/kwok "$KWOK_VERSION"
    fresh kwok kwok && [ -d "$bin/kwok-stages" ] && return 0
    step "kwok $KWOK_VERSION"
    (cd "$tools/kwok" && "${GOBUILD[@]}" -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}" \
        -o "$bin/kwok" sigs.k8s.io/kwok/cmd/kwok)
    # kwok refuses to run without stages; its default "fast" node and pod stages ship in the same module.
    local dir
    dir="$(moddir kwok sigs.k8s.io/kwok)"
    rm -rf "$bin/kwok-stages" && mkdir -p "$bin/kwok-stages"
    cp "$dir"/kustomize/stage/node/fast/node-initialize.yaml "$dir"/kustomize/stage/pod/fast/pod-*.yaml \
        "$bin/kwok-stages/"
    chmod u+w "$bin"/kwok-stages/*
    touch "$bin/kwok"
}

build_pulumi() {
    check_pin pulumi github.com/pulumi/pulumi/pkg/v3 "$PULUMI_VERSION"
    check_pin pulumi github.com/pulumi/pulumi/sdk/v3 "$PULUMI_VERSION"
    fresh pulumi pulumi && return 0
    step "pulumi $PULUMI_VERSION"
    (cd "$tools/pulumi" && "${GOBUILD[@]}" \
        -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$PULUMI_VERSION" \
        -o "$bin/pulumi" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)
}

build_provider() {
    local mod=github.com/pulumi/pulumi-kubernetes/provider/v4
    check_pin provider "$mod" "$PROVIDER_MODULE_VERSION"
    fresh pulumi-resource-kubernetes provider && return 0
    step "pulumi-resource-kubernetes $PROVIDER_VERSION ($PROVIDER_MODULE_VERSION)"
    # The module's committed schema and terraform mapping, embedded by main.go (embed/ is ignored by git).
    local dir
    dir="$(moddir provider $mod)"
    mkdir -p "$tools/provider/embed"
    install -m 0644 "$dir/cmd/pulumi-resource-kubernetes/schema.json" \
        "$dir/cmd/pulumi-resource-kubernetes/terraform-mapping.json" "$tools/provider/embed/"
    (cd "$tools/provider" && "${GOBUILD[@]}" \
        -ldflags "-s -w -X $mod/pkg/version.Version=${PROVIDER_VERSION#v}" \
        -o "$bin/pulumi-resource-kubernetes" .)
}

build_actionlint() {
    check_pin actionlint github.com/rhysd/actionlint "$ACTIONLINT_VERSION"
    fresh actionlint actionlint && return 0
    step "actionlint $ACTIONLINT_VERSION"
    (cd "$tools/actionlint" && "${GOBUILD[@]}" \
        -ldflags "-s -w -X github.com/rhysd/actionlint.version=$ACTIONLINT_VERSION" \
        -o "$bin/actionlint" github.com/rhysd/actionlint/cmd/actionlint)
}

groups=("$@")
[ ${#groups[@]} -gt 0 ] || groups=(kube kwok pulumi provider actionlint)
for g in "${groups[@]}"; do
    case "$g" in
        kube) build_kube ;;
        kwok) build_kwok ;;
        pulumi) build_pulumi ;;
        provider) build_provider ;;
        actionlint) build_actionlint ;;
        *) echo "e2e/build.sh: unknown group $g (kube kwok pulumi provider actionlint)" >&2; exit 2 ;;
    esac
done
