/* shareable.c - buffers other processes map, and passing their
 * descriptors (see shareable.h). Read top to bottom: allocating, exporting
 * and importing a buffer, then the socket helpers. */
#include "memory/shareable.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/status.h"
#include "core/core.h"
#include "memory/resident.h"
#include "memory/vmm.h"

static curd_status out_buffer_missing(const char *what)
{
    return curdi_fail(CURD_E_INVALID_ARGUMENT,
                      "%s: out_buffer is NULL. Fix: pass the address of a"
                      " curd_buffer to receive the handle.",
                      what);
}

/* ------------------------------------------------------------------------
 * Buffers
 * ---------------------------------------------------------------------- */

CURD_API curd_status curd_buffer_alloc_shareable(curd_device *device,
                                                 size_t byte_len,
                                                 curd_buffer *out_buffer)
{
    const char *what = "curd_buffer_alloc_shareable";
    curd_status status = curdi_core_device_check(device, what);
    if (status != CURD_OK)
        return status;
    if (out_buffer == NULL)
        return out_buffer_missing(what);
    if (byte_len == 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: a buffer of 0 bytes was asked for. Fix:"
                          " allocate at least one byte.",
                          what);
    status = curdi_core_device_enter(device);
    if (status != CURD_OK)
        return status;
    /* The budget counts byte_len, as for every resident buffer; the
     * granules' rounding shows in the driver's free memory, which the
     * next budget check reads. */
    status = curdi_resident_reserve_live(device, what, byte_len);
    if (status == CURD_OK) {
        curdi_vmm_mapping mapping = {0};
        status = curdi_vmm_create(device, what, byte_len, &mapping);
        if (status == CURD_OK)
            out_buffer->id = curdi_resident_commit_mapped(
                device, byte_len, mapping.device_ptr,
                mapping.granularity_log2);
        else
            curdi_resident_unreserve(device, byte_len);
    }
    curdi_core_device_leave(device);
    return status;
}

CURD_API curd_status curd_buffer_export_fd(curd_device *device,
                                           curd_buffer buffer, int *out_fd)
{
    const char *what = "curd_buffer_export_fd";
    curd_status status = curdi_core_device_check(device, what);
    if (status != CURD_OK)
        return status;
    if (out_fd == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: out_fd is NULL. Fix: pass the address of an"
                          " int to receive the descriptor.",
                          what);
    /* Marked in use, so that no free unmaps it meanwhile. */
    curdi_resident_use use;
    status = curdi_resident_use_begin(device, what, &buffer.id, 1, &use);
    if (status != CURD_OK)
        return status;
    if (curdi_resident_imported(device, buffer.id))
        /* The driver exports only an allocation this process made (on
         * driver 580 an import's export fails with an invalid value). */
        status = curdi_fail(CURD_E_INVALID_ARGUMENT,
                            "%s: curd_buffer 0x%016" PRIx64 " was imported"
                            " (curd_buffer_import_fd or curd_buffer_import);"
                            " only the process that allocated memory exports"
                            " it. Fix: pass on the descriptor this process"
                            " received (dup() it first if you keep using"
                            " it), or ask the exporter for another.",
                            what, buffer.id);
    else if (!curdi_resident_mapped(device, buffer.id))
        status = curdi_fail(CURD_E_INVALID_ARGUMENT,
                            "%s: curd_buffer 0x%016" PRIx64 " is not"
                            " shareable (curd_buffer_alloc made it). Fix:"
                            " allocate the memory to share with"
                            " curd_buffer_alloc_shareable.",
                            what, buffer.id);
    /* The driver's export once (it took ~600 us on the H200), then dups
     * of the descriptor kept from it. */
    int fd = -1;
    if (status == CURD_OK)
        status = curdi_resident_export_dup(device, what, buffer.id, &fd);
    if (status == CURD_OK && fd < 0) {
        int exported = -1;
        status = curdi_core_device_enter(device);
        if (status == CURD_OK) {
            status = curdi_vmm_export(device, what, use.device_ptr, &exported);
            curdi_core_device_leave(device);
        }
        if (status == CURD_OK)
            status = curdi_resident_export_keep(device, what, buffer.id,
                                                exported, &fd);
    }
    if (status == CURD_OK)
        *out_fd = fd;
    curdi_resident_use_end(device, &use, 1);
    return status;
}

CURD_API curd_status curd_buffer_import_fd(curd_device *device, int fd,
                                           uint64_t byte_len,
                                           curd_buffer *out_buffer)
{
    const char *what = "curd_buffer_import_fd";
    curd_status status = curdi_core_device_check(device, what);
    if (status != CURD_OK)
        return status;
    if (out_buffer == NULL)
        return out_buffer_missing(what);
    if (byte_len == 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: byte_len is 0. Fix: pass the byte_len the"
                          " exporter sent with the descriptor"
                          " (curd_fd_recv).",
                          what);
    if (byte_len > SIZE_MAX)
        return curdi_fail(CURD_E_RANGE,
                          "%s: byte_len %" PRIu64 " is more than this"
                          " process can address. Fix: pass the byte_len the"
                          " exporter sent (curd_fd_recv).",
                          what, byte_len);
    if (fd < 0 || fcntl(fd, F_GETFD) == -1)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: %d is not an open file descriptor (%s). Fix:"
                          " pass the descriptor curd_fd_recv received, and"
                          " close it only after the import.",
                          what, fd, fd < 0 ? "negative" : strerror(errno));
    /* A pipe, a socket or a folder is never a driver's handle; the driver
     * answers one on driver 580 with a code that names no caller's
     * mistake, so it is refused here, before the driver. */
    struct stat kind;
    if (fstat(fd, &kind) == 0 &&
        (S_ISFIFO(kind.st_mode) || S_ISSOCK(kind.st_mode) ||
         S_ISDIR(kind.st_mode)))
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: descriptor %d is a %s, not a CUDA shareable"
                          " handle. Fix: pass the descriptor"
                          " curd_buffer_export_fd gave the exporting"
                          " process, as curd_fd_recv received it.",
                          what, fd,
                          S_ISFIFO(kind.st_mode)   ? "pipe"
                          : S_ISSOCK(kind.st_mode) ? "socket"
                                                   : "folder");
    status = curdi_core_device_enter(device);
    if (status != CURD_OK)
        return status;
    curdi_vmm_mapping mapping = {0};
    uint64_t id = 0;
    status = curdi_vmm_import(device, what, fd, byte_len, &mapping);
    if (status == CURD_OK) {
        status = curdi_resident_import(device, what, mapping.device_ptr,
                                       (size_t)byte_len,
                                       mapping.granularity_log2, &id);
        if (status != CURD_OK)
            (void)curdi_vmm_unmap(device, &mapping);
    }
    curdi_core_device_leave(device);
    if (status == CURD_OK)
        out_buffer->id = id;
    return status;
}

/* ------------------------------------------------------------------------
 * Passing a descriptor over a Unix socket
 * ---------------------------------------------------------------------- */

/* What travels beside the descriptor: a mark that says it is curd's, and
 * the buffer's byte_len. Both ends are processes of one host, so the
 * host's byte order is everyone's. */
#define FD_MESSAGE_MAGIC UINT32_C(0x63757264) /* "curd" */
typedef struct fd_message {
    uint32_t magic;
    uint32_t reserved; /* 0 */
    uint64_t byte_len;
} fd_message;

static curd_status socket_failed(const char *what, int socket, int error)
{
    return curdi_fail(CURD_E_INVALID_ARGUMENT,
                      "%s: socket %d failed: %s. Fix: pass a connected Unix"
                      " domain socket (socketpair(AF_UNIX, SOCK_STREAM, ...)"
                      " or a connected AF_UNIX socket) whose other end is"
                      " still open.",
                      what, socket, strerror(error));
}

CURD_API curd_status curd_fd_send(int socket, int fd, uint64_t byte_len)
{
    const char *what = "curd_fd_send";
    if (fd < 0 || fcntl(fd, F_GETFD) == -1)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: %d is not an open file descriptor. Fix: pass"
                          " the descriptor curd_buffer_export_fd gave.",
                          what, fd);
    if (byte_len == 0)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: byte_len is 0. Fix: send the shared buffer's"
                          " size (curd_buffer_size).",
                          what);
    fd_message message = {FD_MESSAGE_MAGIC, 0, byte_len};
    struct iovec iov = {&message, sizeof message};
    union {
        char bytes[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    struct msghdr header = {0};
    header.msg_iov = &iov;
    header.msg_iovlen = 1;
    header.msg_control = control.bytes;
    header.msg_controllen = sizeof control.bytes;
    struct cmsghdr *cmsg = CMSG_FIRSTHDR(&header);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cmsg), &fd, sizeof fd);
    ssize_t sent;
    do
        sent = sendmsg(socket, &header, MSG_NOSIGNAL);
    while (sent < 0 && errno == EINTR);
    if (sent < 0)
        return socket_failed(what, socket, errno);
    /* A stream socket takes a message this small whole or not at all
     * (the kernel reserves space for it before it copies anything). */
    if ((size_t)sent != sizeof message)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: socket %d took %zd of %zu bytes. Fix: pass a"
                          " blocking Unix domain stream socket.",
                          what, socket, sent, sizeof message);
    return CURD_OK;
}

/* Closes every descriptor the control data carries. */
static void close_received(struct msghdr *header)
{
    for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(header); cmsg != NULL;
         cmsg = CMSG_NXTHDR(header, cmsg)) {
        if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS)
            continue;
        size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof fd, sizeof fd);
            close(fd);
        }
    }
}

CURD_API curd_status curd_fd_recv(int socket, int *out_fd,
                                  uint64_t *out_byte_len)
{
    const char *what = "curd_fd_recv";
    if (out_fd == NULL || out_byte_len == NULL)
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: %s is NULL. Fix: pass the addresses of an int"
                          " and a uint64_t.",
                          what, out_fd == NULL ? "out_fd" : "out_byte_len");
    fd_message message = {0};
    struct iovec iov = {&message, sizeof message};
    union {
        /* Space for more than one, so that a sender's extra descriptors
         * arrive (and are closed) instead of being cut off. */
        char bytes[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    struct msghdr header = {0};
    header.msg_iov = &iov;
    header.msg_iovlen = 1;
    header.msg_control = control.bytes;
    header.msg_controllen = sizeof control.bytes;
    ssize_t received;
    do
        received = recvmsg(socket, &header, MSG_CMSG_CLOEXEC | MSG_WAITALL);
    while (received < 0 && errno == EINTR);
    if (received < 0)
        return socket_failed(what, socket, errno);
    struct cmsghdr *cmsg = CMSG_FIRSTHDR(&header);
    bool one_fd = cmsg != NULL && cmsg->cmsg_level == SOL_SOCKET
                  && cmsg->cmsg_type == SCM_RIGHTS
                  && cmsg->cmsg_len == CMSG_LEN(sizeof(int))
                  && CMSG_NXTHDR(&header, cmsg) == NULL
                  && (header.msg_flags & MSG_CTRUNC) == 0;
    bool whole = (size_t)received == sizeof message
                 && message.magic == FD_MESSAGE_MAGIC
                 && message.reserved == 0 && message.byte_len != 0;
    if (!one_fd || !whole) {
        close_received(&header);
        return curdi_fail(CURD_E_INVALID_ARGUMENT,
                          "%s: socket %d %s. Fix: receive from the socket"
                          " the exporter passed to curd_fd_send, once per"
                          " send.",
                          what, socket,
                          received == 0 ? "was closed at the other end"
                          : !whole      ? "did not carry a curd_fd_send"
                                          " message"
                                        : "carried no single descriptor");
    }
    int fd;
    memcpy(&fd, CMSG_DATA(cmsg), sizeof fd);
    *out_fd = fd;
    *out_byte_len = message.byte_len;
    return CURD_OK;
}
