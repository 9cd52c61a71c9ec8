#!/bin/sh
# check-layers.sh - every #include "..." in lib/ points down the layer
# order of lib/LAYERS: a room includes only the rooms listed before it.
# Rooms are paths under lib/ ("memory/pool"); the folders are layers, so
# a folder's rooms must stand together in the list. A room marked "pure"
# includes nothing from driver/ or core/. Also fails on a lib/ file whose
# room is not listed. Prints each offence; exits 1 on any.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 2

# "room [pure]" lines, comments and blank lines dropped.
listing=$(sed -e 's/#.*//' lib/LAYERS | awk 'NF { print $1, ($2 == "pure" ? "pure" : "") }')
order=$(printf '%s\n' "$listing" | cut -d' ' -f1)
rank() {
    printf '%s\n' "$order" | grep -n -x "$1" | cut -d: -f1
}
folder_of() {
    case "$1" in */*) echo "${1%%/*}" ;; *) echo "." ;; esac
}

bad=0
checked=0

# The folders are layers: once the list has left a folder, it never comes
# back to it.
seen=""
previous=""
for room in $order; do
    folder=$(folder_of "$room")
    if [ "$folder" != "$previous" ]; then
        case " $seen " in *" $folder "*)
            echo "check-layers: lib/LAYERS: $room comes back to folder $folder/ after another folder: a folder's rooms stand together"
            bad=1 ;;
        esac
        seen="$seen $folder"
        previous=$folder
    fi
done

pure_rooms=$(printf '%s\n' "$listing" | awk '$2 == "pure" { print $1 }')
for file in $(find lib -name '*.[ch]' | sort); do
    room=$(echo "$file" | sed -e 's|^lib/||' -e 's/\.[ch]$//')
    own=$(rank "$room")
    if [ -z "$own" ]; then
        echo "check-layers: $file: room '$room' is not in lib/LAYERS"
        bad=1
        continue
    fi
    pure=no
    printf '%s\n' "$pure_rooms" | grep -q -x "$room" && pure=yes
    for header in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file"); do
        [ "$header" = "curd.h" ] && continue
        target=${header%.h}
        checked=$((checked + 1))
        [ "$target" = "$room" ] && continue
        other=$(rank "$target")
        if [ -z "$other" ]; then
            echo "check-layers: $file includes \"$header\", which is no room of lib/LAYERS (write it as folder/room.h)"
            bad=1
        elif [ "$other" -ge "$own" ]; then
            echo "check-layers: $file ($room, layer $own) includes \"$header\" ($target, layer $other): an upward include"
            bad=1
        elif [ "$pure" = yes ]; then
            case "$target" in driver/* | core/*)
                echo "check-layers: $file ($room) is marked pure in lib/LAYERS but includes \"$header\""
                bad=1 ;;
            esac
        fi
    done
done
rooms=$(printf '%s\n' "$order" | wc -l)
folders=$(for room in $order; do folder_of "$room"; done | sort -u | wc -l)
pures=$(printf '%s\n' "$pure_rooms" | grep -c .)
[ "$bad" -eq 0 ] && echo "check-layers: $checked includes in lib/ point down the $rooms rooms of lib/LAYERS, in $folders folders; the $pures pure rooms reach neither driver/ nor core/"
exit "$bad"
