/* nvtx-recorder.c - a stand-in for a profiler's NVTX injection library
 * (what Nsight Systems loads into a program it profiles), for the tests on
 * hosts without one.
 *
 * Built as $(BUILD)/tests/libnvtx-recorder.so beside the test programs and
 * loaded by NVTX itself (the copy compiled into libcurd, lib/base/nvtx.c)
 * when NVTX_INJECTION64_PATH names it: NVTX dlopens it on its first call
 * and calls InitializeInjectionNvtx2 with its export table, from which
 * this takes the table of the domain calls (NVTX_CB_MODULE_CORE2) and
 * fills in the ones curd uses: creating a domain, registering a string,
 * pushing and popping a range.
 *
 * It records each thread's ranges as text, a push as "NAME{" and a pop as
 * "}", so that "curd_dispatch{add_one{}}" says a range named add_one
 * nested in one named curd_dispatch; ranges of other domains (NCCL's)
 * are left out of the record. tests/test-nvtx.c reads the calling
 * thread's record (nvtx_recorder_take), how many threads recorded any,
 * and how many strings were registered, through dlsym.
 *
 * With NVTX_RECORDER_LOG=FILE it also appends each push and pop to FILE
 * as a line, "TID push NAME" or "TID pop", for a look at what a whole
 * program (an example, on a GPU host without Nsight Systems) pushed. */
#define NVTX_NO_IMPL /* the types and the injection interface alone */
#include <nvtx3/nvToolsExt.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

struct nvtxDomainRegistration_st {
    char name[64];
};

/* A registered string; the same text gets the same handle. */
struct nvtxStringRegistration_st {
    struct nvtxStringRegistration_st *next;
    char text[];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct nvtxStringRegistration_st *strings;
static long registrations; /* calls of nvtxDomainRegisterStringA */
static long curd_domains;  /* domains created under the name "curd" */
static long threads;       /* threads that pushed a range */
static FILE *log_file;     /* NVTX_RECORDER_LOG's, or NULL */

/* The calling thread's record; leaked at the thread's end (a test
 * program's few threads). */
static _Thread_local char *record;
static _Thread_local size_t record_len, record_cap;

static void append(const char *a, const char *b, const char *c)
{
    size_t add = strlen(a) + strlen(b) + strlen(c);
    if (record == NULL) {
        pthread_mutex_lock(&lock);
        threads++;
        pthread_mutex_unlock(&lock);
    }
    if (record_len + add + 1 > record_cap) {
        size_t cap = (record_cap + add + 1) * 2;
        char *grown = realloc(record, cap);
        if (grown == NULL)
            abort();
        record = grown;
        record_cap = cap;
    }
    snprintf(record + record_len, record_cap - record_len, "%s%s%s", a, b, c);
    record_len += add;
}

static void log_line(const char *event, const char *text)
{
    if (log_file == NULL)
        return;
    pthread_mutex_lock(&lock);
    fprintf(log_file, "%ld %s%s%s\n", (long)gettid(), event,
            text[0] != '\0' ? " " : "", text);
    fflush(log_file);
    pthread_mutex_unlock(&lock);
}

static nvtxDomainHandle_t NVTX_API domain_create(const char *name)
{
    struct nvtxDomainRegistration_st *domain = calloc(1, sizeof *domain);
    if (domain == NULL)
        abort();
    snprintf(domain->name, sizeof domain->name, "%s", name);
    if (strcmp(name, "curd") == 0) {
        pthread_mutex_lock(&lock);
        curd_domains++;
        pthread_mutex_unlock(&lock);
    }
    return domain;
}

static nvtxStringHandle_t NVTX_API register_string(nvtxDomainHandle_t domain,
                                                   const char *text)
{
    (void)domain;
    pthread_mutex_lock(&lock);
    registrations++;
    struct nvtxStringRegistration_st *s = strings;
    while (s != NULL && strcmp(s->text, text) != 0)
        s = s->next;
    if (s == NULL) {
        s = malloc(sizeof *s + strlen(text) + 1);
        if (s == NULL)
            abort();
        strcpy(s->text, text);
        s->next = strings;
        strings = s;
    }
    pthread_mutex_unlock(&lock);
    return s;
}

/* Only curd's domain goes into the record: other libraries in the
 * process push ranges of their own through the same tool (NCCL's domain
 * "NCCL", on the calling thread and on its own threads). */
static bool is_curd(nvtxDomainHandle_t domain)
{
    return domain != NULL && strcmp(domain->name, "curd") == 0;
}

static int NVTX_API range_push(nvtxDomainHandle_t domain,
                               const nvtxEventAttributes_t *attributes)
{
    const char *text = "?";
    if (attributes->messageType == NVTX_MESSAGE_TYPE_ASCII)
        text = attributes->message.ascii;
    else if (attributes->messageType == NVTX_MESSAGE_TYPE_REGISTERED)
        text = attributes->message.registered->text;
    log_line("push", text);
    if (is_curd(domain))
        append(text, "{", "");
    return 0;
}

static int NVTX_API range_pop(nvtxDomainHandle_t domain)
{
    log_line("pop", "");
    if (is_curd(domain))
        append("}", "", "");
    return 0;
}

EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table);
EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table)
{
    const NvtxExportTableCallbacks *callbacks = get_table(NVTX_ETID_CALLBACKS);
    NvtxFunctionTable table = NULL;
    unsigned size = 0;
    if (callbacks == NULL
        || !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table,
                                              &size)
        || size <= NVTX_CBID_CORE2_DomainCreateA)
        return 0;
    const char *log_path = getenv("NVTX_RECORDER_LOG");
    if (log_path != NULL && log_path[0] != '\0'
        && (log_file = fopen(log_path, "a")) == NULL)
        return 0;
    /* Each slot points at the function pointer NVTX calls through. */
    *table[NVTX_CBID_CORE2_DomainCreateA] = (NvtxFunctionPointer)domain_create;
    *table[NVTX_CBID_CORE2_DomainRegisterStringA] =
        (NvtxFunctionPointer)register_string;
    *table[NVTX_CBID_CORE2_DomainRangePushEx] =
        (NvtxFunctionPointer)range_push;
    *table[NVTX_CBID_CORE2_DomainRangePop] = (NvtxFunctionPointer)range_pop;
    return 1;
}

/* The calling thread's record so far, which the caller frees; the record
 * starts again empty. Never NULL. */
EXPORT char *nvtx_recorder_take(void);
EXPORT char *nvtx_recorder_take(void)
{
    char *taken = strdup(record != NULL ? record : "");
    if (record != NULL) {
        record_len = 0;
        record[0] = '\0';
    }
    return taken;
}

static long read_locked(const long *counter)
{
    pthread_mutex_lock(&lock);
    long count = *counter;
    pthread_mutex_unlock(&lock);
    return count;
}

/* Calls of nvtxDomainRegisterStringA so far. */
EXPORT long nvtx_recorder_registrations(void);
EXPORT long nvtx_recorder_registrations(void)
{
    return read_locked(&registrations);
}

/* Threads that pushed a range so far. */
EXPORT long nvtx_recorder_threads(void);
EXPORT long nvtx_recorder_threads(void)
{
    return read_locked(&threads);
}

/* Domains created under the name "curd" so far: none while CURD_NVTX=0,
 * even where another library (NCCL) loaded this tool. */
EXPORT long nvtx_recorder_curd_domains(void);
EXPORT long nvtx_recorder_curd_domains(void)
{
    return read_locked(&curd_domains);
}
