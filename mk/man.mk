# Manual pages (included by the Makefile): man/*.1 for the tools, man/*.3
# one per function or family; scripts/install-man.sh adds a link for each
# other name of a family. `make check` runs scripts/check-manpages.sh.
MANDIR ?= $(PREFIX)/share/man

.PHONY: install-man uninstall-man check-manpages
install: install-man
uninstall: uninstall-man
install-man:
	$(Q)scripts/install-man.sh $(DESTDIR)$(MANDIR)
uninstall-man:
	$(Q)scripts/install-man.sh --uninstall $(DESTDIR)$(MANDIR)
check-manpages:
	$(Q)scripts/check-manpages.sh
