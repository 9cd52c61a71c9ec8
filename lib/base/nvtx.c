/* nvtx.c - the domain "curd", the CURD_NVTX switch and the pushes and pops
 * behind CURDI_RANGE (base/nvtx.h says what the ranges are and cost). */
#include "base/nvtx.h"

#if CURDI_NVTX

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

/* NVIDIA's NVTX v3, carried as is (third_party/nvtx3/, reached through
 * -isystem): its definitions are hidden and weak, so they are this
 * library's own and never exported (scripts/check-exports.sh). */
#include <nvtx3/nvToolsExt.h>

atomic_int curdi_nvtx_state = -1;

/* Written once, by decide(), before curdi_nvtx_state says 1. */
static nvtxDomainHandle_t domain;
static pthread_once_t decided = PTHREAD_ONCE_INIT;

/* CURD_NVTX=0 turns the ranges off; otherwise the domain is created, which
 * makes NVTX look for a tool (it dlopens $NVTX_INJECTION64_PATH) once for
 * the process. Without one the domain is NULL and every later range costs
 * the inline load and branch alone. A set-user-ID program never calls
 * NVTX: its loader reads that path with getenv, and the environment of
 * such a program is its caller's (CURD_LIBCUDA is ignored there too). */
static void decide(void)
{
    const char *value = getenv("CURD_NVTX");
    bool wanted = value == NULL || strcmp(value, "0") != 0;
    if (wanted && getauxval(AT_SECURE) == 0)
        domain = nvtxDomainCreateA("curd");
    atomic_store_explicit(&curdi_nvtx_state, domain != NULL ? 1 : 0,
                          memory_order_release);
}

/* Whether ranges go to a tool, deciding on the first call. */
static bool listening(void)
{
    int state = atomic_load_explicit(&curdi_nvtx_state, memory_order_acquire);
    if (state < 0) {
        pthread_once(&decided, decide);
        state = atomic_load_explicit(&curdi_nvtx_state, memory_order_acquire);
    }
    return state > 0;
}

/* Pushes a range named by a registered string (handle not NULL) or by
 * text, which the tool copies. */
static void push(nvtxStringHandle_t handle, const char *text)
{
    nvtxEventAttributes_t attributes;
    memset(&attributes, 0, sizeof attributes);
    attributes.version = NVTX_VERSION;
    attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    if (handle != NULL) {
        attributes.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
        attributes.message.registered = handle;
    } else {
        attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
        attributes.message.ascii = text;
    }
    /* A tool that keeps no stack answers a negative level; its pop is then
     * as harmless, so every push is popped alike. */
    (void)nvtxDomainRangePushEx(domain, &attributes);
}

bool curdi_nvtx_push_site(curdi_nvtx_site *site)
{
    if (!listening())
        return false;
    nvtxStringHandle_t handle =
        atomic_load_explicit(&site->handle, memory_order_acquire);
    if (handle == NULL) {
        /* Two threads may both register a site's name: the tool gives the
         * same handle for the same string, and either store is right. A
         * tool that registers no strings answers NULL, and takes the
         * text at every push. */
        handle = nvtxDomainRegisterStringA(domain, site->name);
        atomic_store_explicit(&site->handle, (void *)handle,
                              memory_order_release);
    }
    push(handle, site->name);
    return true;
}

bool curdi_nvtx_push_text(const char *text)
{
    if (!listening())
        return false;
    push(NULL, text);
    return true;
}

void curdi_nvtx_pop(void)
{
    (void)nvtxDomainRangePop(domain);
}

#endif
