# Release tarball and Debian source package (included by the Makefile).
#
#   make dist            $(BUILD)/curd-$(VERSION).tar.gz, reproducible, of
#                        the last commit (scripts/make-dist.sh)
#   make source-package  $(BUILD)/source/curd_$(VERSION)-*.dsc from that
#                        tarball with dpkg-source -b
#                        (scripts/build-source-package.sh)

.PHONY: dist source-package
dist:
	$(Q)scripts/make-dist.sh $(VERSION) $(BUILD)

source-package:
	$(Q)rm -rf $(BUILD)/source
	$(Q)scripts/build-source-package.sh $(VERSION) $(BUILD)/source
