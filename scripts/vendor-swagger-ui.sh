#!/usr/bin/env bash
# Refresh the vendored Swagger UI that /docs serves (src/tidings/console/assets/vendor/).
# Usage: scripts/vendor-swagger-ui.sh 5.35.0   (needs npm; run it, check /docs, commit)
set -euo pipefail
version=${1:?usage: $0 VERSION}
here=$(cd "$(dirname "$0")/.." && pwd)
target="$here/src/tidings/console/assets/vendor/swagger-ui"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "swagger-ui-dist@$version" >/dev/null && tar xzf ./*.tgz)
for f in swagger-ui-bundle.js swagger-ui.css LICENSE NOTICE swagger-ui-bundle.js.LICENSE.txt; do
  cp "$work/package/$f" "$target/$f"
done
sed -i "s/[0-9][0-9.]*[0-9] (vendored)/$version (vendored)/; s/swagger-ui-dist@[0-9.]*[0-9]/swagger-ui-dist@$version/" "$target/README.md"
echo "Swagger UI $version vendored into $target"
