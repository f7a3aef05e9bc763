#!/usr/bin/env bash
# Runs the whole test suite: installs what the tests need if it is missing
# (Debian 12: ZooKeeper 3.8 for the test servers, Curator and kazoo for the
# interop tests), then `cargo test --workspace --all-features` (every test binary, every
# workspace member and feature, and the doctests).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# openssl makes the key material of the TLS tests (keytool comes with Java).
PACKAGES=(zookeeper libcurator-recipes-java libcurator-framework-java python3-kazoo openssl)

missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$pkg")
    fi
done
if ((${#missing[@]})); then
    sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo)
    echo "scripts/test.sh: installing ${missing[*]}" >&2
    "${sudo[@]}" apt-get update
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y "${PACKAGES[@]}"
fi

cargo test --workspace --all-features "$@"
