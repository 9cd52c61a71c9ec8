/* image.h - images told apart by content (pure): PTX, cubin, fatbin and
 * device-code libraries, by their first bytes; the checks an image passes
 * before the driver sees it; and the entry names of PTX text, for
 * messages. No driver, no device:
 * fuzz-image and test-image drive all of it. */
#ifndef CURD_LIB_LAUNCH_IMAGE_H
#define CURD_LIB_LAUNCH_IMAGE_H

#include <stddef.h>

#include "curd.h"

/* The kind of an image by its first bytes, within image_bytes; 0 for none:
 * a cubin starts with ELF's magic (7f 45 4c 46), a fatbin with 50 ed 55 ba
 * (little-endian 0xBA55ED50), a library (an ar archive) with "!<arch>\n",
 * PTX text with .version after any white space and comments (a NUL ends
 * the text). */
int curdi_image_kind_of(const void *image, size_t image_bytes);

/* The size of an ar member header, and the most members a library's check
 * walks (more is refused: no device library has so many). */
#define CURDI_ARCHIVE_MEMBER_HEADER_BYTES 60u
#define CURDI_ARCHIVE_MEMBERS_MAX 65536u

/* Checks an image for curd_program_load (image not NULL, image_bytes not
 * 0), named in the sentence as `name` ("desc->image",
 * "desc->link_images[2]"): its kind; for a fatbin, that the header (16
 * bytes at least) and the payload it announces fit in image_bytes; for a
 * library, that it holds at least one member and that every member's
 * 60-byte header ends in "`\n", gives its size in decimal, and the member
 * (padded to an even size but for the last) fits. Sets *out_kind, and
 * *out_image_bytes to the bytes the image takes: PTX up to its first NUL,
 * the others all of them. CURD_E_PROGRAM, with a sentence showing the
 * first bytes, the header's sizes or the member at fault, and nothing
 * set, otherwise. */
curd_status curdi_image_check(const void *image, size_t image_bytes,
                              const char *name, curd_image_kind *out_kind,
                              size_t *out_image_bytes);

/* Appends the .entry names of NUL-terminated PTX text to out (a string of
 * capacity bytes), comma-separated; names that do not fit are left out. */
void curdi_image_ptx_entry_names(const char *text, char *out,
                                 size_t capacity);

#endif
