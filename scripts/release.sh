#!/usr/bin/env bash
# Builds the release binary (the runtime embedded in it) and packs it with
# its manual page, shell completions, the annotation headers and the
# documentation:
#   dist/memlens-<version>-<arch>-linux.tar.gz
# Unpack anywhere and run bin/memlens; nothing else needs installing.
# Usage: bash scripts/release.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -p memlens
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
name="memlens-$version-$(uname -m)-linux"
stage="dist/$name"
rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/include" "$stage/share/doc/memlens" "$stage/share/memlens/fortran"
cp target/release/memlens "$stage/bin/"
mkdir -p "$stage/share/man/man1" "$stage/share/bash-completion/completions" "$stage/share/zsh/site-functions" "$stage/share/fish/vendor_completions.d"
target/release/memlens man --dir "$stage/share/man/man1"
target/release/memlens completions bash > "$stage/share/bash-completion/completions/memlens"
target/release/memlens completions zsh > "$stage/share/zsh/site-functions/_memlens"
target/release/memlens completions fish > "$stage/share/fish/vendor_completions.d/memlens.fish"
cp include/memlens.h "$stage/include/"
cp fortran/memlens.f90 fortran/memlens_f.c "$stage/share/memlens/fortran/"
cp README.md "$stage/share/doc/memlens/"
cp -r docs "$stage/share/doc/memlens/"
tar -C dist -czf "dist/$name.tar.gz" "$name"
rm -rf "$stage"
echo "dist/$name.tar.gz ($(du -h "dist/$name.tar.gz" | cut -f1))"
