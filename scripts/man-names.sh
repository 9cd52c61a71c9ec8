#!/bin/sh
# Prints the names an mdoc page documents: the .Nm entries of its NAME
# section, one a line, the page's own name first. The manual page check
# (check-manpages.sh) and the installer (install-man.sh) both read a page's
# names here, so a family's link pages need no list of their own.
# usage: scripts/man-names.sh PAGE
set -eu
awk '/^\.Sh / { in_name = ($2 == "NAME"); next }
     in_name && /^\.Nm / { print $2 }' "${1:?usage: man-names.sh PAGE}"
