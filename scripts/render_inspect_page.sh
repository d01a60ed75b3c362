#!/usr/bin/env bash
# Renders the page `sparkstate inspect --html` writes in headless Chromium and prints the screenshot's path,
# so a person can look at the page (Debian: apt-get install chromium; CHROMIUM=... names another binary).
#
#   scripts/render_inspect_page.sh CHECKPOINT [PARTITIONS] [OUT_DIR]
#   scripts/render_inspect_page.sh --sample [PARTITIONS] [OUT_DIR]   # builds a small checkpoint, no Spark
#
# PARTITIONS (default 5) is inspect's --partitions; more inspect arguments (--state-location, --conf,
# --batch) go in INSPECT_ARGS; PYTHON is the interpreter (default python3), which runs this checkout's
# sparkstate (provider/ comes first on PYTHONPATH) with the dependencies installed in it.
# --sample writes OUT_DIR/ckpt as tests/inspection/conftest.py's `query` fixture does: two partitions, four
# batches, on the rocksdb backend (SAMPLE_BACKEND=heap for the other). The window is as tall as the page
# is estimated to be (WINDOW_SIZE=W,H sets it). Exits 1 when inspect fails or the page does not render: no
# screenshot, a screenshot of another size, or one of (almost) a single colour.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python3}"
export PYTHONPATH="$repo/provider${PYTHONPATH:+:$PYTHONPATH}"
chromium="${CHROMIUM:-$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)}"
[ $# -ge 1 ] || { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ -n "$chromium" ] || { echo "no chromium found: apt-get install chromium, or set CHROMIUM" >&2; exit 1; }
target="$1"
partitions="${2:-5}"
out="${3:-$(mktemp -d -t sparkstate-page-XXXXXX)}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

if [ "$target" = "--sample" ]; then
    checkpoint="$out/ckpt"
    rm -rf "$checkpoint" "$out/local"
    (cd "$repo" && "$python" - "$checkpoint" "${SAMPLE_BACKEND:-rocksdb}" <<'PY'
import sys

from tests.inspection.conftest import write_sample_checkpoint

write_sample_checkpoint(sys.argv[1], sys.argv[2])
PY
    )
else
    checkpoint="$target"
fi

page="$out/inspect.html"
png="$out/inspect.png"
rm -f "$page" "$png"
# shellcheck disable=SC2086  # INSPECT_ARGS is a list of arguments
if ! "$python" -m sparkstate.cli inspect --checkpoint "$checkpoint" --partitions "$partitions" --html "$page" \
        ${INSPECT_ARGS:-} > "$out/inspect.txt"; then
    echo "sparkstate inspect failed (its output: $out/inspect.txt)" >&2
    exit 1
fi

# The page's height, estimated from what it holds: charts, table rows, headings and notes.
size="${WINDOW_SIZE:-$("$python" - "$page" <<'PY'
import sys

html = open(sys.argv[1], encoding="utf-8").read()
height = 160 + 265 * html.count("<svg") + 25 * html.count("<tr>") + 60 * html.count("<h2>") + 30 * html.count("<p ")
print(f"1000,{min(height, 16000)}")
PY
)}"
profile="$(mktemp -d -t sparkstate-chromium-XXXXXX)"
trap 'rm -rf "$profile"' EXIT
timeout 120 nice "$chromium" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
    --user-data-dir="$profile" --window-size="$size" --screenshot="$png" "file://$page" \
    > "$out/chromium.log" 2>&1 || true

# Rendered means: a PNG of the window's size whose pixels are not (almost) all one colour. A blank page's
# filtered scanlines hold a handful of byte values; text and bars give dozens.
if ! "$python" - "$png" "$size" <<'PY'
import struct
import sys
import zlib

path, size = sys.argv[1], sys.argv[2]
try:
    data = open(path, "rb").read()
except OSError:
    sys.exit(f"no screenshot at {path}")
if data[:8] != b"\x89PNG\r\n\x1a\n":
    sys.exit(f"{path} is not a PNG")
pos, idat, width, height = 8, [], 0, 0
while pos < len(data):
    length, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + length]
    if kind == b"IHDR":
        width, height = struct.unpack(">II", body[:8])
    elif kind == b"IDAT":
        idat.append(body)
    pos += 12 + length
wanted = tuple(int(v) for v in size.split(","))
if (width, height) != wanted:
    sys.exit(f"{path} is {width}x{height}, not the window's {wanted[0]}x{wanted[1]}")
distinct = len(set(zlib.decompress(b"".join(idat))))
if distinct < 24:
    sys.exit(f"{path} is (almost) one colour ({distinct} distinct byte values): the page did not render")
PY
then
    echo "the page did not render (chromium's output: $out/chromium.log)" >&2
    exit 1
fi
echo "$png"
