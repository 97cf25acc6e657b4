#!/usr/bin/env bash
# generate.sh regenerates the Go code of the API contract: it lints
# api/proto with buf and writes api/dexpb/*.pb.go from it.
#
#   scripts/generate.sh            install missing tools, lint, generate
#   scripts/generate.sh install    install the pinned tools only
#   scripts/generate.sh lint       install missing tools, lint only
#
# The generators are built with `go install` into .tools/bin at the versions
# pinned below (protoc-gen-go follows google.golang.org/protobuf in go.mod, so
# the generated code always matches the runtime it is compiled against). A
# stamp file beside each binary records what was built; a tool is rebuilt
# only when it is missing or its stamp names another version. Files are
# rewritten only when their content changes, and generated files whose proto
# is gone are removed, so two runs in a row leave no diff.
set -euo pipefail

readonly BUF_MODULE=github.com/bufbuild/buf
readonly BUF_VERSION=v1.75.0
readonly PROTOC_GEN_GO_MODULE=google.golang.org/protobuf
readonly PROTOC_GEN_GO_GRPC_MODULE=google.golang.org/grpc/cmd/protoc-gen-go-grpc
readonly PROTOC_GEN_GO_GRPC_VERSION=v1.6.2

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly REPO
readonly TOOLS="$REPO/.tools/bin"
readonly API="$REPO/api"
readonly OUT="$API/dexpb"

log() { printf 'generate: %s\n' "$*" >&2; }
die() {
	printf 'generate: error: %s\n' "$*" >&2
	exit 1
}

usage() {
	sed -n '2,7p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

find_go() {
	if command -v go >/dev/null 2>&1; then
		command -v go
	elif [[ -x /usr/local/go/bin/go ]]; then
		echo /usr/local/go/bin/go
	else
		die "go not found on PATH or at /usr/local/go/bin/go; it is needed to build the generators"
	fi
}

GO=$(find_go)
readonly GO

# module_version prints the version of MODULE that go.mod selects.
module_version() {
	local v
	v=$(cd "$REPO" && "$GO" list -m -f '{{.Version}}' "$1") ||
		die "cannot read the version of $1 from go.mod"
	[[ -n $v ]] || die "go.mod selects no version of $1"
	echo "$v"
}

# install_tool NAME PACKAGE VERSION builds PACKAGE@VERSION into $TOOLS/NAME
# unless the stamp file already names that version.
install_tool() {
	local name=$1 pkg=$2 version=$3
	local bin="$TOOLS/$name" stamp="$TOOLS/$name.version"
	if [[ -x $bin && -f $stamp && $(<"$stamp") == "$pkg@$version" ]]; then
		return
	fi
	log "installing $pkg@$version into $TOOLS"
	mkdir -p "$TOOLS"
	rm -f "$stamp"
	# Build outside the repo so that its go.mod plays no part, with the local
	# toolchain only: a generator that needs a newer Go fails here, loudly.
	(cd / && GOBIN="$TOOLS" GOFLAGS=-buildvcs=false GOTOOLCHAIN=local \
		"$GO" install "$pkg@$version") ||
		die "go install $pkg@$version failed"
	echo "$pkg@$version" >"$stamp"
}

install_tools() {
	install_tool buf "$BUF_MODULE/cmd/buf" "$BUF_VERSION"
	install_tool protoc-gen-go "$PROTOC_GEN_GO_MODULE/cmd/protoc-gen-go" \
		"$(module_version "$PROTOC_GEN_GO_MODULE")"
	install_tool protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_MODULE" "$PROTOC_GEN_GO_GRPC_VERSION"
}

# buf runs the pinned buf in api/ with the pinned plugins first on PATH (the
# plugins in api/buf.gen.yaml are looked up by name) and a cache inside
# .tools, so nothing outside the repository is touched.
run_buf() {
	(cd "$API" && PATH="$TOOLS:$PATH" BUF_CACHE_DIR="$REPO/.tools/cache/buf" \
		"$TOOLS/buf" "$@")
}

lint() {
	run_buf lint || die "buf lint found problems in api/proto (see above)"
}

# generate writes into a scratch directory, then brings $OUT in line with
# it: changed files are replaced, unchanged ones are left alone (mtime too),
# and *.pb.go files that the protos no longer produce are removed.
# Hand-written files in $OUT (doc.go, tests) are never touched.
generate() {
	local tmp
	tmp=$(mktemp -d)
	# shellcheck disable=SC2064 # expand $tmp now
	trap "rm -rf '$tmp'" EXIT
	run_buf generate --output "$tmp" || die "buf generate failed"
	shopt -s nullglob
	local generated=("$tmp"/dexpb/*.pb.go)
	((${#generated[@]} > 0)) || die "buf generate wrote no dexpb/*.pb.go (check api/buf.gen.yaml)"
	mkdir -p "$OUT"
	local f name changed=0
	for f in "${generated[@]}"; do
		name=$(basename "$f")
		if ! cmp -s "$f" "$OUT/$name"; then
			cp "$f" "$OUT/$name"
			log "wrote api/dexpb/$name"
			changed=1
		fi
	done
	for f in "$OUT"/*.pb.go; do
		name=$(basename "$f")
		if [[ ! -e $tmp/dexpb/$name ]]; then
			rm -f "$f"
			log "removed api/dexpb/$name"
			changed=1
		fi
	done
	((changed)) || log "api/dexpb is up to date"
}

main() {
	local verb=${1:-all}
	[[ $# -le 1 ]] || usage
	case $verb in
	all)
		install_tools
		lint
		generate
		;;
	install) install_tools ;;
	lint)
		install_tools
		lint
		;;
	-h | --help | help) usage ;;
	*) usage ;;
	esac
}

main "$@"
