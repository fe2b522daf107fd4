#!/usr/bin/env bash
# Builds etcd and kube-apiserver from the Go modules pinned in tools/kube/go.mod
# into .cache/kube/<stamp>/ at the repository root and points .cache/kube/bin
# at that directory. The stamp is a hash of everything that decides the
# binaries' contents (go.mod, go.sum, the sources under cmd/, this script and
# the Go version), so the binaries are rebuilt only when one of those changes.
#
# Usage: tools/kube/build.sh [-f]   (-f rebuilds even if the stamp matches)
set -euo pipefail

force=0
if [[ "${1:-}" == "-f" ]]; then
	force=1
elif [[ $# -gt 0 ]]; then
	echo "usage: $0 [-f]" >&2
	exit 2
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cache="$root/.cache/kube"

# Version strings stamped into kube-apiserver; keep in step with go.mod.
k8s_version="$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$here/go.mod")"
if [[ -z "$k8s_version" ]]; then
	echo "build.sh: k8s.io/kubernetes not found in tools/kube/go.mod" >&2
	exit 1
fi
minor="${k8s_version#v1.}"
minor="${minor%%.*}"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done

stamp="$(
	cd "$here"
	{
		go version
		echo "$ldflags"
		cat build.sh go.mod go.sum
		find cmd -type f -name '*.go' -print0 | LC_ALL=C sort -z | xargs -0 cat
	} | sha256sum | cut -c1-16
)"
out="$cache/$stamp"

mkdir -p "$cache"
# Serialise concurrent builds (parallel make, several worktrees' make runs).
exec 9>"$cache/.lock"
if command -v flock >/dev/null; then
	flock 9
fi

link_bin() {
	# .cache/kube/bin is a relative symlink to the stamp directory, replaced
	# atomically so readers never see a half-updated directory.
	if [[ -d "$cache/bin" && ! -L "$cache/bin" ]]; then
		rm -rf "$cache/bin"
	fi
	ln -sfn "$stamp" "$cache/bin.tmp"
	mv -T "$cache/bin.tmp" "$cache/bin"
}

if [[ $force -eq 0 && -f "$out/.complete" ]]; then
	link_bin
	echo "kube binaries are up to date ($k8s_version, stamp $stamp) in .cache/kube/bin"
	exit 0
fi

if [[ $force -eq 1 ]]; then
	why="rebuild forced with -f"
elif compgen -G "$cache/*/.complete" >/dev/null; then
	why="tools/kube (go.mod, go.sum, cmd/ or build.sh) or the Go version changed since the last build"
else
	why="no earlier build found"
fi
echo "building kube-apiserver $k8s_version and etcd into .cache/kube/$stamp: $why"
if ! compgen -G "$cache/*/.complete" >/dev/null; then
	echo "first build compiles kube-apiserver from source; this takes several minutes on 2 cores (later builds reuse Go's build cache)"
fi

tmp="$cache/.build-$stamp.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT

cd "$here"
# Static binaries, as upstream ships them; no C toolchain needed.
export CGO_ENABLED=0
flags=(-trimpath -buildvcs=false)

start=$SECONDS
echo "  go build k8s.io/kubernetes/cmd/kube-apiserver"
go build "${flags[@]}" -ldflags="$ldflags" -o "$tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
echo "  go build ./cmd/etcd (go.etcd.io/etcd/server/v3 $(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3))"
go build "${flags[@]}" -ldflags="-s -w" -o "$tmp/etcd" ./cmd/etcd
touch "$tmp/.complete"

rm -rf "$out"
mv "$tmp" "$out"
link_bin

# Keep only the current build.
for d in "$cache"/*/; do
	d="${d%/}"
	name="$(basename "$d")"
	if [[ "$name" != "$stamp" && "$name" != "bin" && -f "$d/.complete" ]]; then
		echo "  removing old build .cache/kube/$name"
		rm -rf "$d"
	fi
done

echo "built kube binaries in $((SECONDS - start))s: .cache/kube/bin -> $stamp"
ls -lh "$out/kube-apiserver" "$out/etcd" | awk '{ print "  " $5 "  " $NF }'
