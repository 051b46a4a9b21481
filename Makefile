# Release builds; everything else is plain `go build`, `go test` (README).

.PHONY: release release-check

# Static, stripped binaries for linux/amd64, linux/arm64 and darwin/arm64
# with SHA256SUMS, in dist/release (VERSION=… overrides git describe).
release:
	scripts/release.sh dist/release

# Builds the release a second time, every package rebuilt (REBUILD=1: go
# build -a, no cached package reused), into dist/release-again, and compares
# the checksums: the build is reproducible when they match.
release-check: release
	REBUILD=1 scripts/release.sh dist/release-again
	cmp dist/release/SHA256SUMS dist/release-again/SHA256SUMS && echo "reproducible: both builds have the same SHA-256 checksums"
