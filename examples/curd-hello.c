/*
 * curd-hello.c - the smallest curd consumer.
 *
 *   cc -std=c11 curd-hello.c $(pkg-config --cflags --libs curd) -o curd-hello
 *
 * Prints the library version and the number of CUDA devices. On a host with
 * a device it also keeps 1 MiB resident on device 0, uploads a pattern,
 * reads it back and compares.
 *
 * Exit status, as every program curd ships (curd-info, curd-bench and the
 * examples): 0 when all of that holds; 1 when something failed; 2 for a
 * bad command line (the examples take no arguments); 3 when there is no
 * usable CUDA driver or no device (the library's CURD_E_NO_DRIVER or
 * CURD_E_NO_DEVICE sentence, ending in "Fix: ...", says which). Every
 * error goes to standard error as one line starting "curd-hello: "; standard
 * output carries only results.
 */
#include <curd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *call, curd_status status)
{
    fprintf(stderr, "curd-hello: %s: %s: %s\n", call,
            curd_status_name(status), curd_last_error());
    return status == CURD_E_NO_DRIVER || status == CURD_E_NO_DEVICE ? 3 : 1;
}

/* Uploads a pattern into a resident buffer, downloads it, compares. */
static int round_trip(curd_device *device)
{
    enum { byte_len = 1 << 20 };
    unsigned char *src = malloc(byte_len);
    unsigned char *dst = malloc(byte_len);
    curd_buffer buffer;
    curd_status status;
    int result = 1;

    if (src == NULL || dst == NULL) {
        fprintf(stderr, "curd-hello: out of host memory\n");
        goto out;
    }
    for (size_t i = 0; i < byte_len; i++)
        src[i] = (unsigned char)(i * 7u + 3u);
    memset(dst, 0, byte_len);

    status = curd_buffer_alloc(device, byte_len, &buffer);
    if (status != CURD_OK) {
        result = fail("curd_buffer_alloc", status);
        goto out;
    }
    status = curd_buffer_upload(device, buffer, src, byte_len);
    if (status == CURD_OK)
        status = curd_buffer_download(device, buffer, dst, byte_len);
    if (status != CURD_OK)
        result = fail("curd_buffer_upload/download", status);
    else if (memcmp(src, dst, byte_len) != 0)
        fprintf(stderr,
                "curd-hello: round trip: the bytes read back differ\n");
    else {
        printf("device 0: 1 MiB round trip ok\n");
        result = 0;
    }
    curd_buffer_free(device, buffer);
out:
    free(src);
    free(dst);
    return result;
}

int main(int argc, char **argv)
{
    int count = 0;
    curd_status status;

    if (argc > 1) {
        fprintf(stderr, "curd-hello: unexpected argument '%s'; usage: "
                        "curd-hello\n", argv[1]);
        return 2;
    }
    if (curd_version() != CURD_VERSION_NUMBER) {
        fprintf(stderr, "curd-hello: built against curd.h %d but loaded "
                        "library %u\n",
                CURD_VERSION_NUMBER, curd_version());
        return 1;
    }

    status = curd_device_count(&count);
    if (status != CURD_OK)
        return fail("curd_device_count", status);
    if (count == 0) {
        fprintf(stderr, "curd-hello: the CUDA driver sees no device. Fix: "
                        "check nvidia-smi and CUDA_VISIBLE_DEVICES.\n");
        return 3;
    }
    printf("curd %s, %d CUDA device(s)\n", curd_version_string(), count);

    curd_device *device;
    status = curd_device_open(0, NULL, &device);
    if (status != CURD_OK)
        return fail("curd_device_open", status);
    int result = round_trip(device);
    status = curd_device_close(device);
    if (status != CURD_OK)
        result = fail("curd_device_close", status);
    return result;
}
