#!/bin/sh
# check-layers.sh - every #include "..." in a layered tree points down the
# order of its LAYERS file: a module includes only the modules listed before
# it, so neither includes nor calls go round in a circle. The trees are
# lib/ (lib/LAYERS) and tools/curd-bench/ (tools/curd-bench/LAYERS). Modules
# are paths under the tree ("memory/pool"); the folders are layers, so a
# folder's modules must stand together in the list. In lib/ every quoted
# include is a module or curd.h, and a module marked "pure" includes nothing
# from driver/ or core/; in tools/curd-bench/ a header outside the tree's
# folders (curd.h, tools/json-writer.h, the generated curd-kernels.h,
# lib/'s modules for internal/) is not its business. Also fails on a file
# whose module is not listed. Prints each offence; exits 1 on any.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 2

folder_of() {
    case "$1" in */*) echo "${1%%/*}" ;; *) echo "." ;; esac
}

bad=0

# check_tree TREE STRICT: STRICT "yes" when every quoted include must be a
# module of TREE (or curd.h).
check_tree() {
    tree=$1
    strict=$2
    layers=$tree/LAYERS
    # "module [pure]" lines, comments and blank lines dropped.
    listing=$(sed -e 's/#.*//' "$layers" | awk 'NF { print $1, ($2 == "pure" ? "pure" : "") }')
    order=$(printf '%s\n' "$listing" | cut -d' ' -f1)
    folders=$(for module in $order; do folder_of "$module"; done | sort -u)
    checked=0

    # The folders are layers: once the list has left a folder, it never
    # comes back to it.
    seen=""
    previous=""
    for module in $order; do
        folder=$(folder_of "$module")
        if [ "$folder" != "$previous" ]; then
            case " $seen " in *" $folder "*)
                echo "check-layers: $layers: $module comes back to folder $folder/ after another folder: a folder's modules stand together"
                bad=1 ;;
            esac
            seen="$seen $folder"
            previous=$folder
        fi
    done

    pure_modules=$(printf '%s\n' "$listing" | awk '$2 == "pure" { print $1 }')
    for file in $(find "$tree" -name '*.[ch]' | sort); do
        module=$(echo "$file" | sed -e "s|^$tree/||" -e 's/\.[ch]$//')
        own=$(printf '%s\n' "$order" | grep -n -x "$module" | cut -d: -f1)
        if [ -z "$own" ]; then
            echo "check-layers: $file: module '$module' is not in $layers"
            bad=1
            continue
        fi
        pure=no
        printf '%s\n' "$pure_modules" | grep -q -x "$module" && pure=yes
        for header in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file"); do
            [ "$header" = "curd.h" ] && continue
            target=${header%.h}
            if [ "$strict" != yes ]; then
                case "$target" in
                    */*) printf '%s\n' "$folders" | grep -q -x "${target%%/*}" || continue ;;
                    *) printf '%s\n' "$order" | grep -q -x "$target" || continue ;;
                esac
            fi
            checked=$((checked + 1))
            [ "$target" = "$module" ] && continue
            other=$(printf '%s\n' "$order" | grep -n -x "$target" | cut -d: -f1)
            if [ -z "$other" ]; then
                echo "check-layers: $file includes \"$header\", which is no module of $layers (write it as folder/module.h)"
                bad=1
            elif [ "$other" -ge "$own" ]; then
                echo "check-layers: $file ($module, layer $own) includes \"$header\" ($target, layer $other): an upward include"
                bad=1
            elif [ "$pure" = yes ]; then
                case "$target" in driver/* | core/*)
                    echo "check-layers: $file ($module) is marked pure in $layers but includes \"$header\""
                    bad=1 ;;
                esac
            fi
        done
    done
    modules=$(printf '%s\n' "$order" | wc -l)
    folder_count=$(printf '%s\n' "$folders" | wc -l)
    pures=$(printf '%s\n' "$pure_modules" | grep -c .)
    summary="check-layers: $checked includes in $tree/ point down the $modules modules of $layers, in $folder_count folders"
    [ "$pures" -gt 0 ] && summary="$summary; the $pures pure modules reach neither driver/ nor core/"
    echo "$summary"
}

check_tree lib yes
check_tree tools/curd-bench no
[ "$bad" -eq 0 ] || echo "check-layers: FAILED (see the lines above)"
exit "$bad"
