#!/usr/bin/env bash
# Builds the release binaries of reins: static (CGO_ENABLED=0), stripped,
# with -trimpath and the version stamped in, for linux/amd64, linux/arm64
# and darwin/arm64, plus SHA256SUMS. The same commit and Go toolchain give
# the same bytes: nothing of the machine, the checkout's path or the time
# of the build goes into them (the VCS revision and commit time do).
#
#   scripts/release.sh [OUT_DIR]      (make release; OUT_DIR defaults to dist/release)
#   VERSION=v1.2.3 scripts/release.sh (default: git describe --tags --always --dirty)
#   REBUILD=1 rebuilds every package (go build -a), for make release-check
set -euo pipefail
cd "$(dirname "$0")/.."

out="${1:-dist/release}"
version="${VERSION:-$(git describe --tags --always --dirty)}"
targets="${TARGETS:-linux/amd64 linux/arm64 darwin/arm64}"
rebuild=()
if [ -n "${REBUILD:-}" ]; then
	rebuild=(-a) # rebuild every package: a check of reproducibility
fi

mkdir -p "$out"
rm -f "$out"/reins-* "$out/SHA256SUMS"
for target in $targets; do
	goos="${target%/*}" goarch="${target#*/}"
	bin="$out/reins-$version-$goos-$goarch"
	echo "building $bin"
	CGO_ENABLED=0 GOOS="$goos" GOARCH="$goarch" GOFLAGS=-mod=readonly \
		go build "${rebuild[@]}" -trimpath -buildvcs=true \
		-ldflags "-s -w -buildid= -X github.com/reinsdev/reins/internal/cli.stampedVersion=$version" \
		-o "$bin" ./cmd/reins
done
(cd "$out" && sha256sum reins-* > SHA256SUMS)
cat "$out/SHA256SUMS"
ls -l "$out" | awk 'NR > 1 && $NF != "SHA256SUMS" { printf "%-45s %6.1f MB\n", $NF, $5 / 1e6 }'
