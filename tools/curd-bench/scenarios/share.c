/* share.c - resident buffers shared with another process (issue 38,
 * curd_buffer_alloc_shareable, curd_buffer_export_fd,
 * curd_buffer_import_fd, curd_fd_send, curd_fd_recv).
 *
 * share/import-read-256M   a 256 MiB curd_buffer_download (16 MiB with
 *                          --quick, for the stand-in driver) into memory
 *                          registered with curd_host_register, by the
 *                          process that imported the buffer against the
 *                          same read by the one that exported it, in the
 *                          same run (and the raw cuMemcpyDtoHAsync in the
 *                          exporter); target: importer/exporter within
 *                          1.02x, each read behind one round trip over
 *                          the socket (the importer's command and reply;
 *                          a ping for the exporter), the plain exporter's
 *                          read beside them. Registered memory, so that
 *                          both reads run at the bus's speed, which a
 *                          copy-out into malloc memory would blur; the
 *                          same pages in both processes (a memfd the
 *                          exporter sends with curd_fd_send), so that
 *                          where each process's memory sits (its NUMA
 *                          node) does not differ between the two reads.
 * share/export-import-map  curd_buffer_export_fd, curd_fd_send, and in the
 *                          other process curd_fd_recv,
 *                          curd_buffer_import_fd (which maps the memory)
 *                          and curd_buffer_free (which unmaps it), then a
 *                          reply: one whole share, against the reply
 *                          alone (the socket's round trip, in every
 *                          share). PyTorch's share-and-rebuild of a CUDA
 *                          tensor (bench/peers/measure.py, through
 *                          CURD_BENCH_PEERS_CSV) is the reference line.
 *
 * The other process is curd-bench itself, started again (fork and exec:
 * the CUDA driver cannot be used in a child that was only forked) with
 * BENCH_SHARE_CHILD_VARIABLE naming its end of a socketpair; it opens the
 * same device and serves the commands below until the socket closes.
 * Each timed operation of the importer includes one command and its
 * reply over the socket (microseconds, against the 256 MiB read's
 * milliseconds). Both scenarios check every byte first: the importer
 * compares its read with the random bytes it makes again from the seed
 * the exporter sent. */
#include "scenarios/share.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness/peers.h"
#include "harness/report.h"
#include "scenarios/scenarios.h"
#include "scenarios/transfer.h"

extern char **environ;

/* The shared buffer; smaller with --quick, where its set-up and checks
 * would take most of a run on the stand-in driver (make bench-smoke). */
#define SHARED_BYTES (256 * BENCH_MIB)
#define QUICK_SHARED_BYTES (16 * BENCH_MIB)
/* The ordinal of the device the child opens. */
#define DEVICE_VARIABLE "CURD_BENCH_SHARE_DEVICE"

/* A command to the child and its argument; the child answers each with
 * one byte, REPLY_OK or REPLY_FAILED (its sentence on its stderr). */
enum {
    COMMAND_IMPORT = 'M', /* receive the buffer's fd, import and keep it,
                           * then the host memory's fd, map and register
                           * it; argument 1: reads follow, so make the
                           * buffer of its own too */
    COMMAND_CHECK = 'C',  /* read it once, compare with the seed's bytes */
    COMMAND_READ = 'R',   /* read it `argument` times */
    COMMAND_READ_OWN = 'O', /* the same from a buffer of its own */
    COMMAND_PING = 'P',   /* nothing: the reply alone */
    COMMAND_SHARES = 'S', /* `argument` times: receive an fd, import, free */
    REPLY_OK = '0',
    REPLY_FAILED = '1'
};

typedef struct share_command {
    uint64_t argument;
    char kind;
} share_command;

/* MSG_NOSIGNAL: a peer that is gone is an error here, not SIGPIPE. */
static bool write_all(int fd, const void *bytes, size_t byte_len)
{
    const char *at = bytes;
    while (byte_len > 0) {
        ssize_t done = send(fd, at, byte_len, MSG_NOSIGNAL);
        if (done < 0 && errno == EINTR)
            continue;
        if (done <= 0)
            return false;
        at += done;
        byte_len -= (size_t)done;
    }
    return true;
}

static bool read_all(int fd, void *bytes, size_t byte_len)
{
    char *at = bytes;
    while (byte_len > 0) {
        ssize_t done = read(fd, at, byte_len);
        if (done < 0 && errno == EINTR)
            continue;
        if (done <= 0)
            return false;
        at += done;
        byte_len -= (size_t)done;
    }
    return true;
}

/* ------------------------------------------------------------------------
 * The importing process
 * ---------------------------------------------------------------------- */

typedef struct share_child {
    curd_device *device;
    int socket;
    curd_buffer buffer;
    /* A resident buffer of its own, of the same size and bytes: its
     * reads are the importer's without the import (made on an import
     * that reads follow). */
    curd_buffer own;
    uint64_t byte_len;
    unsigned char *host; /* the exporter's pages, registered here too */
    bool registered;
} share_child;

/* The byte_len bytes of memfd fd, mapped shared: the same pages in each
 * process that maps them. NULL on failure. */
static unsigned char *host_pages_map(int fd, size_t byte_len)
{
    void *memory = mmap(NULL, byte_len, PROT_READ | PROT_WRITE, MAP_SHARED,
                        fd, 0);
    return memory == MAP_FAILED ? NULL : memory;
}

static bool child_fail(const char *call, curd_status status)
{
    fprintf(stderr, "curd-bench (importing process): %s returned %s: %s\n",
            call, curd_status_name(status), curd_last_error());
    return false;
}

#define CHILD_CURD(call)                                                      \
    do {                                                                      \
        curd_status child_status_ = (call);                                   \
        if (child_status_ != CURD_OK)                                         \
            return child_fail(#call, child_status_);                          \
    } while (0)

static bool child_import(share_child *child, bool reads)
{
    int fd = -1;
    CHILD_CURD(curd_fd_recv(child->socket, &fd, &child->byte_len));
    curd_status status = curd_buffer_import_fd(child->device, fd,
                                               child->byte_len,
                                               &child->buffer);
    close(fd); /* the mapping holds the memory now */
    if (status != CURD_OK)
        return child_fail("curd_buffer_import_fd", status);
    uint64_t host_len = 0;
    CHILD_CURD(curd_fd_recv(child->socket, &fd, &host_len));
    child->host = host_len == child->byte_len
                      ? host_pages_map(fd, child->byte_len)
                      : NULL;
    close(fd);
    if (child->host == NULL) {
        fprintf(stderr, "curd-bench (importing process): the exporter's "
                        "host memory could not be mapped\n");
        return false;
    }
    CHILD_CURD(curd_host_register(child->device, child->host,
                                  child->byte_len));
    child->registered = true;
    if (!reads)
        return true;
    CHILD_CURD(curd_buffer_alloc(child->device, child->byte_len, &child->own));
    CHILD_CURD(curd_buffer_upload(child->device, child->own, child->host,
                                  child->byte_len));
    return true;
}

static bool child_check(share_child *child, uint64_t seed)
{
    unsigned char *expected = malloc(child->byte_len);
    bool same;
    if (expected == NULL || child->host == NULL) {
        free(expected);
        fprintf(stderr, "curd-bench (importing process): nothing to check\n");
        return false;
    }
    bench_fill_random(&seed, expected, child->byte_len);
    bench_poison(child->host, child->byte_len);
    curd_status status = curd_buffer_download(child->device, child->buffer,
                                              child->host, child->byte_len);
    same = status == CURD_OK &&
           bench_compare("the importer's read", expected, child->host,
                         child->byte_len) == 0;
    free(expected);
    if (status != CURD_OK)
        return child_fail("curd_buffer_download", status);
    if (!same)
        fprintf(stderr, "curd-bench (importing process): %s\n",
                bench_failure());
    return same;
}

static bool child_shares(share_child *child, uint64_t count)
{
    for (uint64_t i = 0; i < count; i++) {
        int fd = -1;
        uint64_t byte_len = 0;
        curd_buffer buffer = {0};
        char reply = REPLY_OK;
        CHILD_CURD(curd_fd_recv(child->socket, &fd, &byte_len));
        curd_status status =
            curd_buffer_import_fd(child->device, fd, byte_len, &buffer);
        close(fd);
        if (status != CURD_OK)
            return child_fail("curd_buffer_import_fd", status);
        CHILD_CURD(curd_buffer_free(child->device, buffer));
        if (i + 1 < count && !write_all(child->socket, &reply, 1))
            return false;
    }
    return true;
}

/* count reads of buffer into the exporter's pages. */
static bool child_read(share_child *child, curd_buffer buffer, uint64_t count)
{
    for (uint64_t i = 0; i < count; i++)
        CHILD_CURD(curd_buffer_download(child->device, buffer, child->host,
                                        child->byte_len));
    return true;
}

static bool child_serve(share_child *child, const share_command *command)
{
    switch (command->kind) {
    case COMMAND_IMPORT:
        return child_import(child, command->argument != 0);
    case COMMAND_CHECK:
        return child_check(child, command->argument);
    case COMMAND_READ:
        return child_read(child, child->buffer, command->argument);
    case COMMAND_READ_OWN:
        return child_read(child, child->own, command->argument);
    case COMMAND_PING:
        return true;
    case COMMAND_SHARES:
        return child_shares(child, command->argument);
    default:
        fprintf(stderr, "curd-bench (importing process): unknown command\n");
        return false;
    }
}

bool bench_share_child_wanted(void)
{
    return getenv(BENCH_SHARE_CHILD_VARIABLE) != NULL;
}

int bench_share_child_main(void)
{
    share_child child;
    share_command command;
    const char *device_text = getenv(DEVICE_VARIABLE);
    memset(&child, 0, sizeof child);
    child.socket = atoi(getenv(BENCH_SHARE_CHILD_VARIABLE));
    curd_status status = curd_device_open(
        device_text != NULL ? atoi(device_text) : 0, NULL, &child.device);
    if (status != CURD_OK) {
        child_fail("curd_device_open", status);
        return 1;
    }
    while (read_all(child.socket, &command, sizeof command)) {
        char reply = child_serve(&child, &command) ? REPLY_OK : REPLY_FAILED;
        if (!write_all(child.socket, &reply, 1))
            break;
    }
    if (child.registered)
        curd_host_unregister(child.device, child.host);
    if (child.buffer.id != 0)
        curd_buffer_free(child.device, child.buffer);
    if (child.own.id != 0)
        curd_buffer_free(child.device, child.own);
    curd_device_close(child.device);
    if (child.host != NULL)
        munmap(child.host, child.byte_len);
    return 0;
}

/* ------------------------------------------------------------------------
 * The exporting process
 * ---------------------------------------------------------------------- */

typedef struct share {
    const bench_env *env;
    curd_buffer buffer;
    unsigned char *host; /* host_fd's pages; registered where reads */
    int host_fd;         /* -1: none */
    bool registered;
    bench_cu_stream stream;
    bool have_stream;
    size_t byte_len; /* SHARED_BYTES, or QUICK_SHARED_BYTES */
    int socket; /* -1: no child */
    pid_t child;
    bench_copy_op exporter;     /* curd_buffer_download */
    bench_copy_op exporter_raw; /* cuMemcpyDtoHAsync + sync */
} share;

/* Sends a command and waits for its reply. */
static int share_ask(share *s, char kind, uint64_t argument)
{
    share_command command;
    char reply = 0;
    memset(&command, 0, sizeof command);
    command.kind = kind;
    command.argument = argument;
    if (!write_all(s->socket, &command, sizeof command) ||
        !read_all(s->socket, &reply, 1))
        return bench_fail("the importing process is gone (its sentence is "
                          "on standard error above)");
    if (reply != REPLY_OK)
        return bench_fail("the importing process failed command '%c' (its "
                          "sentence is on standard error above)", kind);
    return 0;
}

/* Starts curd-bench again as the importing process. */
static int share_spawn(share *s)
{
    int sockets[2];
    char *exe;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0)
        return bench_fail("socketpair failed: %s", strerror(errno));
    exe = realpath("/proc/self/exe", NULL);
    if (exe == NULL) {
        close(sockets[0]);
        close(sockets[1]);
        return bench_fail("/proc/self/exe cannot be read: %s",
                          strerror(errno));
    }
    char socket_text[64], device_text[64];
    char **child_environment = NULL;
    size_t count = 0;
    snprintf(socket_text, sizeof socket_text, "%s=%d",
             BENCH_SHARE_CHILD_VARIABLE, sockets[1]);
    snprintf(device_text, sizeof device_text, "%s=%d", DEVICE_VARIABLE,
             s->env->props.ordinal);
    /* The child's environment is this one plus the two above, made
     * before the fork: a forked copy of a process with threads (the copy
     * team) may make only async-signal-safe calls until it execs. */
    while (environ[count] != NULL)
        count++;
    child_environment = calloc(count + 3, sizeof *child_environment);
    if (child_environment == NULL) {
        free(exe);
        close(sockets[0]);
        close(sockets[1]);
        return bench_fail("out of host memory for the importer's "
                          "environment");
    }
    memcpy(child_environment, environ, count * sizeof *environ);
    child_environment[count] = socket_text;
    child_environment[count + 1] = device_text;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        /* The child's end survives the exec. */
        if (fcntl(sockets[1], F_SETFD, 0) != 0)
            _exit(127);
        char *argv[] = {exe, NULL};
        execve(exe, argv, child_environment);
        _exit(127);
    }
    free(child_environment);
    free(exe);
    close(sockets[1]);
    if (pid < 0) {
        close(sockets[0]);
        return bench_fail("fork failed: %s", strerror(errno));
    }
    s->socket = sockets[0];
    s->child = pid;
    return 0;
}

static void share_free(share *s)
{
    const bench_env *env = s->env;
    if (s->socket >= 0) {
        close(s->socket); /* the child's reads end, so it exits */
        int status = 0;
        while (waitpid(s->child, &status, 0) < 0 && errno == EINTR)
            ;
    }
    if (s->registered)
        curd_host_unregister(env->device, s->host);
    if (s->buffer.id != 0)
        curd_buffer_free(env->device, s->buffer);
    if (s->have_stream)
        bench_stream_release(env, s->stream);
    if (s->host != NULL)
        munmap(s->host, s->byte_len);
    if (s->host_fd >= 0)
        close(s->host_fd);
}

/* The shareable buffer, with random bytes from seed, and the child,
 * started; 1 when the device cannot share (the scenario skips). */
static int share_init(share *s, const bench_env *env, const char *name,
                      bool with_host)
{
    uint64_t seed = env->seed ^ 0x5aa5u;
    uint64_t device_ptr = 0;
    memset(s, 0, sizeof *s);
    s->env = env;
    s->socket = -1;
    s->host_fd = -1;
    s->byte_len = env->quick ? QUICK_SHARED_BYTES : SHARED_BYTES;
    curd_status status =
        curd_buffer_alloc_shareable(env->device, s->byte_len, &s->buffer);
    if (status == CURD_E_UNSUPPORTED) {
        bench_report_skip(name, "no shareable buffers on this driver or "
                                "device (CURD_E_UNSUPPORTED)");
        return 1;
    }
    if (status != CURD_OK)
        return bench_fail_curd("curd_buffer_alloc_shareable", status);
    s->host_fd = memfd_create("curd-bench-share", MFD_CLOEXEC);
    if (s->host_fd < 0 || ftruncate(s->host_fd, (off_t)s->byte_len) != 0 ||
        (s->host = host_pages_map(s->host_fd, s->byte_len)) == NULL)
        return bench_fail("no shared host memory of %zu bytes: %s",
                          s->byte_len, strerror(errno));
    bench_fill_random(&seed, s->host, s->byte_len);
    BENCH_CURD(curd_buffer_upload(env->device, s->buffer, s->host,
                                  s->byte_len));
    if (with_host) {
        BENCH_CURD(curd_host_register(env->device, s->host, s->byte_len));
        s->registered = true;
        BENCH_CURD(curd_buffer_device_ptr(env->device, s->buffer,
                                          &device_ptr));
        if (bench_stream_acquire(env, &s->stream) != 0)
            return -1;
        s->have_stream = true;
        memset(&s->exporter, 0, sizeof s->exporter);
        s->exporter.env = env;
        s->exporter.buffer = s->buffer;
        s->exporter.device_ptr = (bench_cu_deviceptr)device_ptr;
        s->exporter.stream = s->stream;
        s->exporter.host = s->host;
        s->exporter.byte_len = s->byte_len;
        s->exporter_raw = s->exporter;
    }
    return share_spawn(s);
}

/* The child imports the buffer (COMMAND_IMPORT, then its fd). */
static int share_hand_over(share *s)
{
    const bench_env *env = s->env;
    share_command command;
    char reply = 0;
    int fd = -1;
    memset(&command, 0, sizeof command);
    command.kind = COMMAND_IMPORT;
    command.argument = s->registered; /* the reads scenario */
    BENCH_CURD(curd_buffer_export_fd(env->device, s->buffer, &fd));
    curd_status status = CURD_OK;
    bool sent = write_all(s->socket, &command, sizeof command);
    if (sent)
        status = curd_fd_send(s->socket, fd, s->byte_len);
    close(fd);
    /* The importer reads into the same pages as this process. */
    if (sent && status == CURD_OK)
        status = curd_fd_send(s->socket, s->host_fd, s->byte_len);
    if (status != CURD_OK)
        return bench_fail_curd("curd_fd_send", status);
    if (!sent || !read_all(s->socket, &reply, 1) || reply != REPLY_OK)
        return bench_fail("the importing process could not import the "
                          "buffer (its sentence is on standard error above)");
    return 0;
}

static int op_importer_read(void *context, uint64_t iterations)
{
    return share_ask(context, COMMAND_READ, iterations);
}

static int op_importer_read_own(void *context, uint64_t iterations)
{
    return share_ask(context, COMMAND_READ_OWN, iterations);
}

/* The exporter's read with the same round trip as the importer's (a
 * command and its answer, then the read): the target compares the two
 * reads, not the socket, whose two wake-ups cost tens of microseconds. */
static int op_exporter_read_after_ping(void *context, uint64_t iterations)
{
    share *s = context;
    for (uint64_t i = 0; i < iterations; i++)
        if (share_ask(s, COMMAND_PING, 0) != 0 ||
            bench_op_curd_download(&s->exporter, 1) != 0)
            return -1;
    return 0;
}

static int op_ping(void *context, uint64_t iterations)
{
    for (uint64_t i = 0; i < iterations; i++)
        if (share_ask(context, COMMAND_PING, 0) != 0)
            return -1;
    return 0;
}

/* iterations whole shares: export, send, the child's import, map, free
 * and reply, close. */
static int op_share(void *context, uint64_t iterations)
{
    share *s = context;
    share_command command;
    memset(&command, 0, sizeof command);
    command.kind = COMMAND_SHARES;
    command.argument = iterations;
    if (!write_all(s->socket, &command, sizeof command))
        return bench_fail("the importing process is gone");
    for (uint64_t i = 0; i < iterations; i++) {
        int fd = -1;
        char reply = 0;
        BENCH_CURD(curd_buffer_export_fd(s->env->device, s->buffer, &fd));
        curd_status status = curd_fd_send(s->socket, fd, s->byte_len);
        close(fd);
        if (status != CURD_OK)
            return bench_fail_curd("curd_fd_send", status);
        if (!read_all(s->socket, &reply, 1) || reply != REPLY_OK)
            return bench_fail("the importing process failed a share (its "
                              "sentence is on standard error above)");
    }
    return 0;
}

/* The exporter's reads, curd's and the raw one, give the random bytes. */
static int check_exporter(share *s)
{
    uint64_t seed = s->env->seed ^ 0x5aa5u;
    unsigned char *expected = bench_host_alloc(s->byte_len, "the bytes");
    int result = -1;
    if (expected == NULL)
        return -1;
    bench_fill_random(&seed, expected, s->byte_len);
    if (bench_check_read_into(bench_op_curd_download, &s->exporter, s->host,
                              expected, s->byte_len,
                              "the exporter's curd read") == 0 &&
        bench_check_read_into(bench_op_raw_dtoh_async, &s->exporter_raw,
                              s->host, expected, s->byte_len,
                              "the exporter's raw read") == 0)
        result = 0;
    free(expected);
    return result;
}

/* What both scenarios start with: the scenario's memory, the share made
 * (with the exporter's read buffers where reads) and handed to the
 * importer, and the bytes checked there. 0: ready; 1: not run here
 * (share_init said why); -1: failed. On anything but 0 nothing is left. */
static int share_begin(const bench_env *env, const char *name, bool reads,
                       share *s, bench_scenario **out_scenario)
{
    bench_scenario *scenario = malloc(sizeof *scenario);
    if (scenario == NULL) {
        bench_fail("out of host memory for %s", name);
        return -1;
    }
    int begun = share_init(s, env, name, reads);
    if (begun == 0 && (share_hand_over(s) != 0 ||
                       share_ask(s, COMMAND_CHECK, env->seed ^ 0x5aa5u) != 0))
        begun = -1;
    if (begun != 0) {
        share_free(s); /* what a failed share_init made too */
        free(scenario);
        return begun;
    }
    *out_scenario = scenario;
    return 0;
}

int bench_share_import_read(const bench_env *env)
{
    const char *name = "share/import-read-256M";
    share s;
    bench_scenario *scenario = NULL;
    int begun = share_begin(env, name, true, &s, &scenario);
    if (begun != 0)
        return begun > 0 ? 0 : -1;
    int result = -1;
    /* Checked first: the exporter's reads must be the bytes it wrote. */
    if (check_exporter(&s) != 0)
        goto done;
    bench_scenario_init(scenario, env, name, env->samples_large,
                        "a %zu MiB curd_buffer_download of a shareable "
                        "buffer into registered memory, by the process that "
                        "imported it and by the one that exported it%s",
                        s.byte_len / BENCH_MIB, env->quick ? " (--quick)" : "");
    char label[BENCH_LABEL_BYTES];
    snprintf(label, sizeof label,
             "exporter: curd_buffer_download %zu MiB, registered",
             s.byte_len / BENCH_MIB);
    int exporter = bench_add_variant(scenario, &(bench_variant_spec){
        .label = label,
        .role = BENCH_ROLE_CURD, .op = bench_op_curd_download,
        .context = &s.exporter, .bytes_per_op = s.byte_len,
        .iterations = 1});
    int exporter_trip = bench_add_variant(scenario, &(bench_variant_spec){
        .label = "exporter: a round trip, then the same read",
        .role = BENCH_ROLE_CURD, .op = op_exporter_read_after_ping,
        .context = &s, .bytes_per_op = s.byte_len, .iterations = 1});
    int importer = bench_add_variant(scenario, &(bench_variant_spec){
        .label = "importer: the same read in the other process, + a round "
                 "trip",
        .role = BENCH_ROLE_CURD, .op = op_importer_read, .context = &s,
        .bytes_per_op = s.byte_len, .iterations = 1});
    /* Where the importer's extra time comes from: the import, or the
     * read in a second process (whose context the GPU switches to). */
    int own = bench_add_variant(scenario, &(bench_variant_spec){
        .label = "importer: a buffer of its own, the same read",
        .role = BENCH_ROLE_REF, .op = op_importer_read_own, .context = &s,
        .bytes_per_op = s.byte_len, .iterations = 1});
    snprintf(label, sizeof label,
             "exporter: cuMemcpyDtoHAsync %zu MiB, registered",
             s.byte_len / BENCH_MIB);
    int raw = bench_add_variant(scenario, &(bench_variant_spec){
        .label = label,
        .role = BENCH_ROLE_RAW, .op = bench_op_raw_dtoh_async,
        .context = &s.exporter_raw, .bytes_per_op = s.byte_len,
        .iterations = 1});
    if (exporter < 0 || exporter_trip < 0 || importer < 0 || own < 0 ||
        raw < 0 || bench_measure(scenario) != 0)
        goto done;
    /* Each side's read behind one round trip, so that what the ratio
     * weighs is the read in each process. */
    bench_check_ratio(scenario, importer, exporter_trip, 1.02,
                      "importer within 1.02x of the exporter");
    bench_check_ratio(scenario, importer, exporter, 0.0, NULL);
    bench_check_ratio(scenario, importer, own, 0.0, NULL);
    bench_check_ratio(scenario, exporter, raw, 0.0, NULL);
    bench_report_scenario(scenario);
    result = 0;
done:
    share_free(&s);
    free(scenario);
    return result;
}

int bench_share_export_import(const bench_env *env)
{
    const char *name = "share/export-import-map";
    share s;
    bench_scenario *scenario = NULL;
    int begun = share_begin(env, name, false, &s, &scenario);
    if (begun != 0)
        return begun > 0 ? 0 : -1;
    int result = -1;
    bench_scenario_init(scenario, env, name, env->samples,
                        "a %zu MiB shareable buffer handed to another "
                        "process: export, send, import and map, unmap, "
                        "reply", s.byte_len / BENCH_MIB);
    int whole = bench_add_variant(scenario, &(bench_variant_spec){
        .label = "export_fd + fd_send; importer: fd_recv + import_fd "
                 "(maps) + free + reply",
        .role = BENCH_ROLE_CURD, .op = op_share, .context = &s});
    int ping = bench_add_variant(scenario, &(bench_variant_spec){
        .label = "the reply alone (a command and its answer)",
        .role = BENCH_ROLE_REF, .op = op_ping, .context = &s});
    if (whole < 0 || ping < 0 || bench_measure(scenario) != 0)
        goto done;
    bench_check_extra_ns(scenario, whole, ping, 0.0, NULL);
    {
        char variant[96];
        double pytorch_ns = 0.0;
        if (bench_peer_median_ns(name, "torch", &pytorch_ns, variant,
                                 sizeof variant))
            bench_note(scenario, "reference: PyTorch %.1f us (%s, %s); "
                                 "curd/PyTorch %.3g",
                       pytorch_ns / 1e3, BENCH_PEERS_CSV_VARIABLE, variant,
                       scenario->variants[whole].median_ns / pytorch_ns);
        else
            bench_note(scenario, "reference: no PyTorch figure (run "
                                 "bench/peers/measure.py, pass its CSV in "
                                 "%s)", BENCH_PEERS_CSV_VARIABLE);
    }
    bench_report_scenario(scenario);
    result = 0;
done:
    share_free(&s);
    free(scenario);
    return result;
}
