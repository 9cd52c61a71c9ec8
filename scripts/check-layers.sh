#!/bin/sh
# check-layers.sh - every #include "..." in lib/ points down the layer
# order of lib/LAYERS: a room includes only the rooms listed before it.
# Also fails on a lib/ file whose room is not listed. Prints each
# offending include; exits 1 on any.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 2

order=$(grep -v '^#' lib/LAYERS | grep -v '^$')
rank() {
    printf '%s\n' "$order" | grep -n -x "$1" | cut -d: -f1
}

bad=0
checked=0
for file in lib/*.c lib/*.h; do
    room=$(basename "$file" | sed 's/\.[ch]$//')
    own=$(rank "$room")
    if [ -z "$own" ]; then
        echo "check-layers: $file: room '$room' is not in lib/LAYERS"
        bad=1
        continue
    fi
    for header in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file"); do
        target=$(basename "$header" .h)
        [ "$header" = "curd.h" ] && continue
        checked=$((checked + 1))
        [ "$target" = "$room" ] && continue
        other=$(rank "$target")
        if [ -z "$other" ]; then
            echo "check-layers: $file includes \"$header\", which is no room of lib/LAYERS"
            bad=1
        elif [ "$other" -ge "$own" ]; then
            echo "check-layers: $file ($room, layer $own) includes \"$header\" ($target, layer $other): an upward include"
            bad=1
        fi
    done
done
[ "$bad" -eq 0 ] && echo "check-layers: $checked includes in lib/ point down the $(printf '%s\n' "$order" | wc -l) layers of lib/LAYERS"
exit "$bad"
