#!/usr/bin/env bash
# Builds the release binary (the runtime embedded in it) and packs it with
# its manual page, shell completions, the annotation headers and the
# documentation:
#   dist/memlens-<version>-<arch>-linux.tar.gz
# Unpack anywhere and run bin/memlens; nothing else needs installing.
# Linked by cargo-zigbuild against glibc 2.17's symbols (the binary and the
# runtime it embeds, whose nested build inherits zig as the linker), so it
# runs on RHEL/CentOS 7 and every newer distribution; the script fails if
# either needs a newer C library. Needs `cargo install cargo-zigbuild` and
# zig (`pip install ziglang` in a virtual environment, or zig on PATH).
# Usage: bash scripts/release.sh
set -euo pipefail
cd "$(dirname "$0")/.."
glibc=2.17
target="$(uname -m)-unknown-linux-gnu"
cargo zigbuild --release --locked -p memlens --target "$target.$glibc"
out="${CARGO_TARGET_DIR:-target}/$target/release"
built="$out/memlens"
# The highest GLIBC_ version a file needs.
needs() { objdump -T "$1" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1; }
runtime=$(ls -t "$out"/build/memlens-*/out/libmemlens_runtime.so | head -1)
for file in "$built" "$runtime"; do
    need=$(needs "$file")
    if [ "$(printf '%s\n' "$need" "$glibc" | sort -V | tail -1)" != "$glibc" ]; then
        echo "$file needs glibc $need, above $glibc" >&2
        exit 1
    fi
    echo "$file: glibc $need or newer"
done
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
name="memlens-$version-$(uname -m)-linux"
stage="dist/$name"
rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/include" "$stage/share/doc/memlens" "$stage/share/memlens/fortran"
cp "$built" "$stage/bin/"
mkdir -p "$stage/share/man/man1" "$stage/share/bash-completion/completions" "$stage/share/zsh/site-functions" "$stage/share/fish/vendor_completions.d"
"$built" man --dir "$stage/share/man/man1"
"$built" completions bash > "$stage/share/bash-completion/completions/memlens"
"$built" completions zsh > "$stage/share/zsh/site-functions/_memlens"
"$built" completions fish > "$stage/share/fish/vendor_completions.d/memlens.fish"
cp include/memlens.h "$stage/include/"
cp fortran/memlens.f90 fortran/memlens_f.c "$stage/share/memlens/fortran/"
cp README.md "$stage/share/doc/memlens/"
cp -r docs "$stage/share/doc/memlens/"
tar -C dist -czf "dist/$name.tar.gz" "$name"
rm -rf "$stage"
echo "dist/$name.tar.gz ($(du -h "dist/$name.tar.gz" | cut -f1))"
