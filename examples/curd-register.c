/*
 * curd-register.c - transfers straight from and to the caller's memory.
 *
 *   cc -std=c11 curd-register.c $(pkg-config --cflags --libs curd) -o curd-register
 *
 * Page-locks a 16 MiB frame of the program's own memory with
 * curd_host_register, so that uploads from it and downloads into it move
 * in one DMA each without staging; uploads a frame, downloads it into a
 * second registered frame, checks every byte and unregisters both. A driver without
 * cuMemHostRegister still runs the transfers, through staging.
 *
 * Exit status, as every program curd ships (curd-info, curd-bench and the
 * examples): 0 when all of that holds; 1 when something failed; 2 for a
 * bad command line (the examples take no arguments); 3 when there is no
 * usable CUDA driver or no device (the library's CURD_E_NO_DRIVER or
 * CURD_E_NO_DEVICE sentence, ending in "Fix: ...", says which). Every
 * error goes to standard error as one line starting "curd-register: "; standard
 * output carries only results.
 */
#include <curd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FRAME_BYTES ((size_t)16 << 20)

static int fail(const char *call, curd_status status)
{
    fprintf(stderr, "curd-register: %s: %s: %s\n", call,
            curd_status_name(status), curd_last_error());
    return status == CURD_E_NO_DRIVER || status == CURD_E_NO_DEVICE ? 3 : 1;
}


/* Registers a frame; false (and a note) when the driver cannot. */
static bool try_register(curd_device *device, void *frame)
{
    curd_status status = curd_host_register(device, frame, FRAME_BYTES);
    if (status == CURD_OK)
        return true;
    printf("not registered (%s): the transfers go through staging\n",
           curd_status_name(status));
    return false;
}

static int round_trip(curd_device *device, unsigned char *out,
                      unsigned char *in)
{
    bool out_registered = try_register(device, out);
    bool in_registered = try_register(device, in);
    curd_buffer frame;
    curd_status status = curd_buffer_alloc(device, FRAME_BYTES, &frame);
    int result = 0;

    if (status == CURD_OK)
        status = curd_buffer_upload(device, frame, out, FRAME_BYTES);
    if (status == CURD_OK)
        status = curd_buffer_download(device, frame, in, FRAME_BYTES);
    if (status != CURD_OK)
        result = fail("the round trip", status);
    else if (memcmp(out, in, FRAME_BYTES) != 0) {
        fprintf(stderr, "curd-register: the frame differs\n");
        result = 1;
    } else
        printf("16 MiB up and back from %s memory: every byte matches\n",
               out_registered && in_registered ? "registered" : "pageable");
    /* Unregister before the memory goes back to malloc. */
    if (out_registered)
        curd_host_unregister(device, out);
    if (in_registered)
        curd_host_unregister(device, in);
    return result;
}

int main(int argc, char **argv)
{
    unsigned char *out = aligned_alloc(4096, FRAME_BYTES);
    unsigned char *in = aligned_alloc(4096, FRAME_BYTES);
    curd_device *device;
    curd_status status;
    int result = 1;

    if (argc > 1) {
        fprintf(stderr, "curd-register: unexpected argument '%s'; usage: "
                        "curd-register\n", argv[1]);
        result = 2;
        goto done;
    }
    if (out == NULL || in == NULL) {
        fprintf(stderr, "curd-register: out of host memory\n");
        goto done;
    }
    for (size_t i = 0; i < FRAME_BYTES; i++)
        out[i] = (unsigned char)(i ^ (i >> 12));
    memset(in, 0, FRAME_BYTES);

    status = curd_device_open(0, NULL, &device);
    if (status != CURD_OK) {
        result = fail("curd_device_open", status);
        goto done;
    }
    result = round_trip(device, out, in);
    status = curd_device_close(device);
    if (status != CURD_OK && result == 0)
        result = fail("curd_device_close", status);
done:
    free(out);
    free(in);
    return result;
}
