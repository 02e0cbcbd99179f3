#!/usr/bin/env bash
# Make sure a Java 17+ runtime is there for Spark. Installs openjdk-17-jre-headless
# with apt-get when it is missing and we run as root; otherwise prints the command.
set -euo pipefail
java_major() {
    command -v java >/dev/null 2>&1 || { echo 0; return; }
    java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit}'
}
major=$(java_major)
if [ "${major:-0}" -ge 17 ] 2>/dev/null; then
    exit 0
fi
cmd="apt-get update && apt-get install -y openjdk-17-jre-headless"
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "Java 17+ not found (found: ${major:-none}); installing: $cmd" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless
else
    echo "Spark needs Java 17 or newer (found: ${major:-none}). Install it with: sudo $cmd" >&2
    exit 1
fi
