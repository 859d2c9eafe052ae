#!/usr/bin/env bash
# One line per missing prerequisite, saying what to install; exit 1 if any is missing.
set -u
missing=0
need() { printf 'tidings: %s\n' "$1" >&2; missing=1; }

py=${PYTHON:-python3}
if ! command -v "$py" >/dev/null 2>&1; then
  need "Python 3.11+ is required: install it (Debian: apt-get install python3 python3-venv)."
elif ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  need "Python 3.11+ is required, found $("$py" -V 2>&1): install a newer Python."
elif ! "$py" -c 'import venv, ensurepip' >/dev/null 2>&1; then
  need "Python's venv module is missing: install it (Debian: apt-get install python3-venv)."
fi

# `make run` needs Python alone: the broker serves without the rest
if [ "${1:-}" = "--core" ]; then
  exit $missing
fi

# A system package: installed when root with apt-get, else one line saying how.
system_package() {  # command package what-needs-it
  command -v "$1" >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    printf 'tidings: installing %s with apt-get (running as root) for %s\n' "$2" "$3" >&2
    (apt-get install -y -q "$2" >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q "$2" >/dev/null 2>&1; }) \
      && return 0
  fi
  need "$3 needs $2: install it (Debian: apt-get install $2)."
}

system_package java openjdk-17-jre-headless "Spark (the pipeline, its tests)"
if command -v java >/dev/null 2>&1; then
  jv=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
  if [ -n "$jv" ] && [ "$jv" -lt 17 ]; then
    need "Java 17+ is required by Spark, found Java $jv: install openjdk-17-jre-headless."
  fi
fi
system_package tesseract tesseract-ocr "detect_printed_text (the function library)"
system_package bwrap bubblewrap "The function sandbox"
# ZooKeeper's scripts are not on PATH: look for the server's jar (Debian's zookeeper package)
if [ ! -e /usr/share/java/zookeeper.jar ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    printf 'tidings: installing zookeeper with apt-get (running as root) for elastic matching\n' >&2
    apt-get install -y -q zookeeper >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q zookeeper >/dev/null 2>&1; }
  fi
  [ -e /usr/share/java/zookeeper.jar ] \
    || need "Elastic matching (tidings serve --matching elastic, its tests) needs zookeeper: install it (Debian: apt-get install zookeeper)."
fi
if [ "${1:-}" = "--tests" ]; then  # what only the test suite needs
  system_package haproxy haproxy "The balanced-cluster tests"
  system_package chromium chromium "The console's browser tests"
  system_package jq jq "The README's tour (tests/test_readme.py)"
  system_package curl curl "The README's tour (tests/test_readme.py)"
fi
exit $missing
